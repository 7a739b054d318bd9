//! Byte vectors written out from the spec's structure layouts.

use super::*;

fn hdr(kind: u8, len: u16, xid: u32) -> Vec<u8> {
    let mut v = vec![4, kind];
    v.extend_from_slice(&len.to_be_bytes());
    v.extend_from_slice(&xid.to_be_bytes());
    v
}

fn set_len(v: &mut [u8]) {
    let n = v.len() as u16;
    v[2..4].copy_from_slice(&n.to_be_bytes());
}

/// A flow-mod as ovs-ofctl sends `table=0,priority=100,in_port=1,ip,
/// nw_dst=10.0.0.0/24,actions=output:2,goto_table:3`.
fn sample_flow_mod() -> Vec<u8> {
    let mut v = hdr(t::FLOW_MOD, 0, 7);
    v.extend_from_slice(&0x1122u64.to_be_bytes()); // cookie
    v.extend_from_slice(&0u64.to_be_bytes()); // cookie mask
    v.extend_from_slice(&[0, fc::ADD]); // table, command
    v.extend_from_slice(&[0, 0, 0, 0]); // idle, hard timeout
    v.extend_from_slice(&100u16.to_be_bytes());
    v.extend_from_slice(&NO_BUFFER.to_be_bytes());
    v.extend_from_slice(&port::ANY.to_be_bytes());
    v.extend_from_slice(&GROUP_ANY.to_be_bytes());
    v.extend_from_slice(&[0, ff::SEND_FLOW_REM as u8, 0, 0]); // flags, pad
    assert_eq!(v.len(), 48, "ofp_flow_mod fixed part");
    // ofp_match: type 1, length 4 + 8 + 6 + 12 = 30, then 2 bytes of padding.
    v.extend_from_slice(&[0, 1, 0, 30]);
    v.extend_from_slice(&[0x80, 0x00, oxm::IN_PORT << 1, 4, 0, 0, 0, 1]);
    v.extend_from_slice(&[0x80, 0x00, oxm::ETH_TYPE << 1, 2, 0x08, 0x00]);
    v.extend_from_slice(&[
        0x80,
        0x00,
        (oxm::IPV4_DST << 1) | 1,
        8,
        10,
        0,
        0,
        0,
        255,
        255,
        255,
        0,
    ]);
    v.extend_from_slice(&[0, 0]);
    // apply-actions with one output (8 + 16), then goto-table 3.
    v.extend_from_slice(&[0, 4, 0, 24, 0, 0, 0, 0]);
    v.extend_from_slice(&[0, 0, 0, 16, 0, 0, 0, 2, 0xff, 0xe5, 0, 0, 0, 0, 0, 0]);
    v.extend_from_slice(&[0, 1, 0, 8, 3, 0, 0, 0]);
    set_len(&mut v);
    v
}

#[test]
fn flow_mod_decodes_from_spec_layout() {
    let (h, m) = decode(&sample_flow_mod()).unwrap();
    assert_eq!((h.version, h.kind, h.xid), (4, t::FLOW_MOD, 7));
    let Message::FlowMod(f) = m else {
        panic!("not a flow-mod: {m:?}")
    };
    assert_eq!(f.cookie, 0x1122);
    assert_eq!(f.priority, 100);
    assert_eq!(f.flags, ff::SEND_FLOW_REM);
    assert_eq!(
        f.matches,
        vec![
            Oxm::exact(oxm::IN_PORT, 1),
            Oxm::exact(oxm::ETH_TYPE, 0x800),
            Oxm {
                field: oxm::IPV4_DST,
                value: 0x0a00_0000,
                mask: Some(0xffff_ff00)
            }
        ]
    );
    assert_eq!(
        f.apply_actions(),
        &[Action::Output {
            port: 2,
            max_len: 0xffe5
        }]
    );
    assert_eq!(f.goto(), Some(3));
    // Encoding it again gives the same bytes.
    assert_eq!(encode::flow_mod(7, &f), sample_flow_mod());
}

fn err_of(v: &[u8]) -> OfpError {
    decode(v).expect_err("must be refused")
}

/// Replaces the match of the sample (OXMs `oxms`) and fixes lengths.
fn with_match(oxms: &[u8]) -> Vec<u8> {
    let base = sample_flow_mod();
    let mut v = base[..48].to_vec();
    let mlen = 4 + oxms.len();
    v.extend_from_slice(&[0, 1]);
    v.extend_from_slice(&(mlen as u16).to_be_bytes());
    v.extend_from_slice(oxms);
    v.resize(48 + mlen.div_ceil(8) * 8, 0);
    set_len(&mut v);
    v
}

/// Replaces the instructions of the sample.
fn with_instructions(insts: &[u8]) -> Vec<u8> {
    let mut v = sample_flow_mod()[..48 + 32].to_vec();
    v.extend_from_slice(insts);
    set_len(&mut v);
    v
}

#[test]
fn match_errors_follow_the_spec() {
    let bm = |c| OfpError::new(et::BAD_MATCH, c);
    // tcp_dst without ip_proto=6: BAD_PREREQ.
    let tcp = [0x80, 0, oxm::TCP_DST << 1, 2, 0, 80];
    assert_eq!(err_of(&with_match(&tcp)), bm(bmc::BAD_PREREQ));
    // ... and fine with eth_type=ip, ip_proto=6.
    let mut ok = vec![0x80, 0, oxm::ETH_TYPE << 1, 2, 8, 0];
    ok.extend_from_slice(&[0x80, 0, oxm::IP_PROTO << 1, 1, 6]);
    ok.extend_from_slice(&tcp);
    assert!(decode(&with_match(&ok)).is_ok());
    // ipv4 field with eth_type=ipv6: BAD_PREREQ.
    let v6 = [
        0x80,
        0,
        oxm::ETH_TYPE << 1,
        2,
        0x86,
        0xdd,
        0x80,
        0,
        oxm::IPV4_SRC << 1,
        4,
        1,
        2,
        3,
        4,
    ];
    assert_eq!(err_of(&with_match(&v6)), bm(bmc::BAD_PREREQ));
    // vlan_pcp without a vlan: BAD_PREREQ.
    assert_eq!(
        err_of(&with_match(&[0x80, 0, oxm::VLAN_PCP << 1, 1, 3])),
        bm(bmc::BAD_PREREQ)
    );
    // Same field twice: DUP_FIELD.
    let dup = [
        0x80,
        0,
        oxm::IN_PORT << 1,
        4,
        0,
        0,
        0,
        1,
        0x80,
        0,
        oxm::IN_PORT << 1,
        4,
        0,
        0,
        0,
        2,
    ];
    assert_eq!(err_of(&with_match(&dup)), bm(bmc::DUP_FIELD));
    // Wrong payload length for the field: BAD_LEN.
    assert_eq!(
        err_of(&with_match(&[0x80, 0, oxm::IN_PORT << 1, 2, 0, 1])),
        bm(bmc::BAD_LEN)
    );
    // TLV running past the match: BAD_LEN.
    assert_eq!(
        err_of(&with_match(&[0x80, 0, oxm::IN_PORT << 1, 4, 0, 0])),
        bm(bmc::BAD_LEN)
    );
    // Mask on a field that has none: BAD_MASK.
    assert_eq!(
        err_of(&with_match(&[
            0x80,
            0,
            (oxm::IN_PORT << 1) | 1,
            8,
            0,
            0,
            0,
            1,
            0,
            0,
            0,
            1
        ])),
        bm(bmc::BAD_MASK)
    );
    // Value bits outside the mask: BAD_WILDCARDS.
    let mut w = vec![0x80, 0, oxm::ETH_TYPE << 1, 2, 8, 0];
    w.extend_from_slice(&[
        0x80,
        0,
        (oxm::IPV4_DST << 1) | 1,
        8,
        10,
        0,
        0,
        1,
        255,
        255,
        255,
        0,
    ]);
    assert_eq!(err_of(&with_match(&w)), bm(bmc::BAD_WILDCARDS));
    // Unknown field, and an NXM (OVS) class: BAD_FIELD.
    assert_eq!(
        err_of(&with_match(&[0x80, 0, 100 << 1, 1, 0])),
        bm(bmc::BAD_FIELD)
    );
    assert_eq!(
        err_of(&with_match(&[0x00, 1, 0, 4, 0, 0, 0, 1])),
        bm(bmc::BAD_FIELD)
    );
    // VLAN_VID beyond 13 bits: BAD_VALUE.
    assert_eq!(
        err_of(&with_match(&[0x80, 0, oxm::VLAN_VID << 1, 2, 0x20, 0])),
        bm(bmc::BAD_VALUE)
    );
    // A match of type STANDARD (OpenFlow 1.1): BAD_TYPE.
    let mut v = with_match(&[]);
    v[49] = 0;
    assert_eq!(err_of(&v), bm(bmc::BAD_TYPE));
}

#[test]
fn instruction_and_action_errors_follow_the_spec() {
    let bi = |c| OfpError::new(et::BAD_INSTRUCTION, c);
    let ba = |c| OfpError::new(et::BAD_ACTION, c);
    // goto the same table (0) or a lower one: BAD_TABLE_ID.
    assert_eq!(
        err_of(&with_instructions(&[0, 1, 0, 8, 0, 0, 0, 0])),
        bi(bic::BAD_TABLE_ID)
    );
    // goto 255 (OFPTT_ALL): BAD_TABLE_ID.
    assert_eq!(
        err_of(&with_instructions(&[0, 1, 0, 8, 255, 0, 0, 0])),
        bi(bic::BAD_TABLE_ID)
    );
    // Unknown instruction type.
    assert_eq!(
        err_of(&with_instructions(&[0, 9, 0, 8, 0, 0, 0, 0])),
        bi(bic::UNKNOWN_INST)
    );
    // Instruction length not a multiple of 8.
    assert_eq!(
        err_of(&with_instructions(&[0, 1, 0, 12, 1, 0, 0, 0, 0, 0, 0, 0])),
        bi(bic::BAD_LEN)
    );
    // An experimenter action (OVS resubmit: NX vendor 0x2320, subtype 1).
    let resubmit = [
        0, 4, 0, 24, 0, 0, 0, 0, 0xff, 0xff, 0, 16, 0, 0, 0x23, 0x20, 0, 1, 0, 1, 0, 0, 0, 0,
    ];
    // turnoutd knows no experimenter: "unknown experimenter id".
    assert_eq!(
        err_of(&with_instructions(&resubmit)),
        ba(bac::BAD_EXPERIMENTER)
    );
    assert_eq!(ba(bac::BAD_EXPERIMENTER).name(), "OFPBAC_BAD_EXPERIMENTER");
    // An MPLS push of another EtherType: BAD_ARGUMENT; a PBB push (26):
    // not supported, BAD_TYPE.
    let push_mpls = [0, 4, 0, 16, 0, 0, 0, 0, 0, 19, 0, 8, 0x88, 0x00, 0, 0];
    assert_eq!(
        err_of(&with_instructions(&push_mpls)),
        ba(bac::BAD_ARGUMENT)
    );
    let push_pbb = [0, 4, 0, 16, 0, 0, 0, 0, 0, 26, 0, 8, 0x88, 0xe7, 0, 0];
    assert_eq!(err_of(&with_instructions(&push_pbb)), ba(bac::BAD_TYPE));
    // An experimenter instruction: BAD_EXPERIMENTER.
    let exp_inst = [0xff, 0xff, 0, 8, 0, 0, 0x23, 0x20];
    assert_eq!(
        err_of(&with_instructions(&exp_inst)),
        bi(bic::BAD_EXPERIMENTER)
    );
    assert_eq!(bi(bic::BAD_EXPERIMENTER).name(), "OFPBIC_BAD_EXPERIMENTER");
    // An action of a bad length.
    let short = [0, 4, 0, 16, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0, 2];
    assert_eq!(err_of(&with_instructions(&short)), ba(bac::BAD_LEN));
    // output to port 0 / OFPP_ANY: BAD_OUT_PORT.
    let p0 = [
        0, 4, 0, 24, 0, 0, 0, 0, 0, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];
    assert_eq!(err_of(&with_instructions(&p0)), ba(bac::BAD_OUT_PORT));
    // set-field of an unknown field: BAD_SET_TYPE.
    let sf = [
        0,
        4,
        0,
        24,
        0,
        0,
        0,
        0,
        0,
        25,
        0,
        16,
        0x80,
        0,
        120 << 1,
        1,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
    ];
    assert_eq!(err_of(&with_instructions(&sf)), ba(bac::BAD_SET_TYPE));
}

#[test]
fn set_field_push_pop_and_group_round_trip() {
    let f = FlowMod {
        cookie: 1,
        cookie_mask: 0,
        table_id: 2,
        command: fc::MODIFY_STRICT,
        idle_timeout: 0,
        hard_timeout: 0,
        priority: 7,
        buffer_id: NO_BUFFER,
        out_port: port::ANY,
        out_group: GROUP_ANY,
        flags: ff::CHECK_OVERLAP,
        matches: vec![
            Oxm::exact(oxm::ETH_TYPE, 0x86dd),
            Oxm {
                field: oxm::IPV6_DST,
                value: 0xfe80 << 112,
                mask: Some(0xffff << 112),
            },
            Oxm {
                field: oxm::VLAN_VID,
                value: 0x1000,
                mask: Some(0x1000),
            },
        ],
        instructions: vec![
            Instruction::ApplyActions(vec![
                Action::PopVlan,
                Action::PushVlan(0x8100),
                Action::SetField(Oxm::exact(oxm::ETH_DST, 0x0200_0000_0001)),
                Action::SetField(Oxm::exact(oxm::VLAN_PCP, 5)),
                Action::DecNwTtl,
                Action::Group(9),
                Action::Output {
                    port: port::FLOOD,
                    max_len: 0,
                },
            ]),
            Instruction::GotoTable(4),
        ],
    };
    let b = encode::flow_mod(99, &f);
    assert_eq!(b.len() % 8, 0);
    let (_, m) = decode(&b).unwrap();
    assert_eq!(m, Message::FlowMod(f));
}

#[test]
fn truncations_and_bit_flips_never_panic() {
    let v = sample_flow_mod();
    for n in 0..v.len() {
        let mut t = v[..n].to_vec();
        if n >= 4 {
            set_len(&mut t);
        }
        let _ = decode(&t);
        assert!(decode(&v[..n]).is_err(), "length field no longer fits");
    }
    for i in 0..v.len() {
        for bit in 0..8 {
            let mut t = v.clone();
            t[i] ^= 1 << bit;
            let _ = decode(&t);
            let _ = frame_len(&t);
        }
    }
}

#[test]
fn framing_and_header_errors() {
    assert_eq!(frame_len(&[4, 0, 0]), Ok(None));
    assert_eq!(frame_len(&hdr(0, 8, 1)), Ok(Some(8)));
    assert_eq!(frame_len(&hdr(0, 7, 1)), Err(OfpError::bad_len()));
    // Length field and buffer disagree.
    assert_eq!(err_of(&hdr(t::BARRIER_REQUEST, 9, 1)), OfpError::bad_len());
    // A body on a message that has none.
    let mut b = hdr(t::FEATURES_REQUEST, 12, 1);
    b.extend_from_slice(&[0; 4]);
    assert_eq!(err_of(&b), OfpError::bad_len());
    // OpenFlow 1.0 after the hello: BAD_VERSION.
    let mut old = hdr(t::BARRIER_REQUEST, 8, 1);
    old[0] = 1;
    assert_eq!(
        err_of(&old),
        OfpError::new(et::BAD_REQUEST, brc::BAD_VERSION)
    );
    // A switch-to-controller message: BAD_TYPE; experimenter: BAD_EXPERIMENTER.
    assert_eq!(
        err_of(&hdr(t::FEATURES_REPLY, 8, 1)),
        OfpError::new(et::BAD_REQUEST, brc::BAD_TYPE)
    );
    assert_eq!(
        err_of(&hdr(t::EXPERIMENTER, 8, 1)),
        OfpError::new(et::BAD_REQUEST, brc::BAD_EXPERIMENTER)
    );
    assert_eq!(
        decode(&hdr(t::BARRIER_REQUEST, 8, 5)).unwrap().1,
        Message::BarrierRequest
    );
}

#[test]
fn hello_negotiation() {
    // OVS 2.x hello: version 6 header, bitmap of 1.0, 1.3 (0x12) and more.
    let mut h = hdr(t::HELLO, 16, 1);
    h[0] = 6;
    h.extend_from_slice(&[0, 1, 0, 8, 0, 0, 0, 0x52]);
    let (hd, m) = decode(&h).unwrap();
    assert_eq!(m, Message::Hello(Some(0x52)));
    assert_eq!(negotiate(hd.version, Some(0x52)), Ok(4));
    assert_eq!(
        negotiate(6, Some(0x02)),
        Err(OfpError::new(et::HELLO_FAILED, hfc::INCOMPATIBLE))
    );
    assert_eq!(negotiate(4, None), Ok(4));
    assert_eq!(
        negotiate(1, None).map_err(|e| e.name()),
        Err("OFPHFC_INCOMPATIBLE".into())
    );
    // Ours offers exactly 1.3.
    assert_eq!(
        hello(3),
        [4, 0, 0, 16, 0, 0, 0, 3, 0, 1, 0, 8, 0, 0, 0, 0x10]
    );
}

#[test]
fn multipart_requests() {
    let mut v = hdr(t::MULTIPART_REQUEST, 0, 2);
    v.extend_from_slice(&[0, 4, 0, 0, 0, 0, 0, 0]);
    v.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]);
    set_len(&mut v);
    assert_eq!(
        decode(&v).unwrap().1,
        Message::Multipart {
            flags: 0,
            req: MultipartRequest::PortStats(port::ANY)
        }
    );
    // Flow stats: table all, any port/group, no cookie filter, empty match.
    let mut f = hdr(t::MULTIPART_REQUEST, 0, 3);
    f.extend_from_slice(&[0, 1, 0, 0, 0, 0, 0, 0]);
    f.extend_from_slice(&[0xff, 0, 0, 0]);
    f.extend_from_slice(&port::ANY.to_be_bytes());
    f.extend_from_slice(&GROUP_ANY.to_be_bytes());
    f.extend_from_slice(&[0; 4 + 16]);
    f.extend_from_slice(&[0, 1, 0, 4, 0, 0, 0, 0]);
    set_len(&mut f);
    let Message::Multipart {
        req: MultipartRequest::Flow(r),
        ..
    } = decode(&f).unwrap().1
    else {
        panic!("flow request")
    };
    assert_eq!(
        (r.table_id, r.out_port, r.matches.len()),
        (0xff, port::ANY, 0)
    );
    // Meter stats and config of OFPM_ALL, meter features.
    for (ty, want) in [
        (mp::METER, MultipartRequest::Meter(0xffff_ffff)),
        (mp::METER_CONFIG, MultipartRequest::MeterConfig(0xffff_ffff)),
    ] {
        let mut m = hdr(t::MULTIPART_REQUEST, 0, 5);
        m.extend_from_slice(&[0, ty as u8, 0, 0, 0, 0, 0, 0]);
        m.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]);
        set_len(&mut m);
        assert_eq!(
            decode(&m).unwrap().1,
            Message::Multipart {
                flags: 0,
                req: want
            }
        );
        m.truncate(m.len() - 4);
        set_len(&mut m);
        assert_eq!(err_of(&m), OfpError::bad_len(), "meter request cut short");
    }
    let mut m = hdr(t::MULTIPART_REQUEST, 16, 6);
    m.extend_from_slice(&[0, 11, 0, 0, 0, 0, 0, 0]);
    assert_eq!(
        decode(&m).unwrap().1,
        Message::Multipart {
            flags: 0,
            req: MultipartRequest::MeterFeatures
        }
    );
    assert_eq!(meter_features_body(0, 0, 0, 0, 0), vec![0; 16]);
    // An experimenter multipart (OVS's NXST_*): BAD_EXPERIMENTER.
    let mut x = hdr(t::MULTIPART_REQUEST, 0, 4);
    x.extend_from_slice(&[0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0x23, 0x20, 0, 0, 0, 1]);
    set_len(&mut x);
    assert_eq!(
        err_of(&x),
        OfpError::new(et::BAD_REQUEST, brc::BAD_EXPERIMENTER)
    );
    // Table features with a body (setting features): OFPTFFC_EPERM.
    let mut tf = hdr(t::MULTIPART_REQUEST, 0, 4);
    tf.extend_from_slice(&[0, 12, 0, 0, 0, 0, 0, 0]);
    tf.extend_from_slice(&[0, 64, 0, 0, 0, 0, 0, 0]);
    tf.extend_from_slice(&[0; 56]);
    set_len(&mut tf);
    let e = err_of(&tf);
    assert_eq!(e, OfpError::new(et::TABLE_FEATURES_FAILED, tffc::EPERM));
    assert_eq!(e.name(), "OFPTFFC_EPERM");
    // Unknown multipart type (queue stats, 5): BAD_MULTIPART.
    let mut u = hdr(t::MULTIPART_REQUEST, 16, 4);
    u.extend_from_slice(&[0, 5, 0, 0, 0, 0, 0, 0]);
    assert_eq!(
        err_of(&u),
        OfpError::new(et::BAD_REQUEST, brc::BAD_MULTIPART)
    );
}

#[test]
fn meter_mod_decodes_with_its_bands_checked() {
    // ADD meter 1, kbps, one drop band of 1000 kb/s (ofp_meter_band_drop).
    let mut v = hdr(t::METER_MOD, 0, 9);
    v.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1]);
    v.extend_from_slice(&[0, 1, 0, 16, 0, 0, 0x03, 0xe8, 0, 0, 0, 0, 0, 0, 0, 0]);
    set_len(&mut v);
    assert_eq!(
        decode(&v).unwrap().1,
        Message::MeterMod(MeterMod {
            command: mc::ADD,
            flags: 1,
            meter_id: 1,
            bands: vec![Band {
                kind: mbt::DROP,
                rate: 1000,
                burst: 0,
                prec_level: 0,
                experimenter: 0
            }],
        })
    );
    // A band whose length is not a multiple of 8, or runs past the end.
    let mut b = v.clone();
    b[8 + 8 + 3] = 12;
    assert_eq!(err_of(&b), OfpError::bad_len());
    let mut b = v.clone();
    b[8 + 8 + 3] = 24;
    assert_eq!(err_of(&b), OfpError::bad_len());
    // No bands (a delete) is fine; a body cut short is not.
    let mut d = hdr(t::METER_MOD, 0, 10);
    d.extend_from_slice(&[0, 2, 0, 0, 0xff, 0xff, 0xff, 0xff]);
    set_len(&mut d);
    assert!(matches!(
        decode(&d).unwrap().1,
        Message::MeterMod(MeterMod {
            command: mc::DELETE,
            ..
        })
    ));
    d.truncate(12);
    set_len(&mut d);
    assert_eq!(err_of(&d), OfpError::bad_len());
}

#[test]
fn replies_have_the_spec_sizes() {
    let fr = features_reply(1, 0xabc, 0, 255, cap::FLOW_STATS);
    assert_eq!(fr.len(), 32);
    assert_eq!(&fr[8..16], &0xabcu64.to_be_bytes());
    assert_eq!(fr[20], 255);
    assert_eq!(get_config_reply(1, 0, 128).len(), 12);
    assert_eq!(desc_body("a", "b", "c", "d", "e").len(), 1056);
    assert_eq!(table_stats_entry(0, 1, 2, 3).len(), 24);
    assert_eq!(aggregate_body(1, 2, 3).len(), 24);
    let tf = table_features_entry(&TableFeatures {
        table_id: 3,
        instructions: vec![it::GOTO_TABLE, it::APPLY_ACTIONS],
        next_tables: vec![4, 5, 6],
        apply_actions: vec![at::OUTPUT],
        matches: vec![oxm::IN_PORT, oxm::ETH_DST],
        set_fields: vec![oxm::ETH_DST],
        ..Default::default()
    });
    // 64 fixed, then 16 + 8 + 8 + 8 + 16 + 16 + 8 + 8 of properties.
    assert_eq!(tf.len(), 64 + 88);
    assert_eq!(u16::from_be_bytes([tf[0], tf[1]]) as usize, tf.len());
    assert_eq!(&tf[64..72], &[0, 0, 0, 12, 0, 1, 0, 4]);
    assert_eq!(port_stats_entry(&PortStats::default()).len(), 112);
    let p = PortDesc {
        port_no: 1,
        name: "a-very-long-port-name".into(),
        ..Default::default()
    };
    let e = port_entry(&p);
    assert_eq!(e.len(), 64);
    assert_eq!(&e[16..32], b"a-very-long-por\0", "name cut, NUL kept");
    assert_eq!(port_status(1, 0, &p).len(), 80);
    let fs = FlowStats {
        matches: vec![Oxm::exact(oxm::IN_PORT, 1)],
        instructions: vec![Instruction::GotoTable(1)],
        ..Default::default()
    };
    let e = flow_stats_entry(&fs);
    assert_eq!(e.len(), 48 + 16 + 8);
    assert_eq!(u16::from_be_bytes([e[0], e[1]]) as usize, e.len());
    let fr = flow_removed(1, &fs, 2);
    assert_eq!(
        fr.len(),
        48 + 16,
        "ofp_flow_removed is 56 with an empty match"
    );
    let pi = packet_in(
        1,
        NO_BUFFER,
        60,
        0,
        0,
        0,
        &[Oxm::exact(oxm::IN_PORT, 1)],
        &[1; 60],
    );
    assert_eq!(pi.len(), 8 + 16 + 16 + 2 + 60);
    let er = error(5, et::BAD_ACTION, bac::BAD_TYPE, &[9; 100]);
    assert_eq!(er.len(), 12 + 64);
    assert_eq!(&er[8..12], &[0, 2, 0, 0]);
}

#[test]
fn multipart_replies_split_past_64k() {
    let parts: Vec<Vec<u8>> = (0..1000).map(|_| vec![0u8; 200]).collect();
    let msgs = multipart_reply(9, mp::FLOW, &parts);
    assert_eq!(msgs.len(), 4);
    let mut total = 0;
    for (i, m) in msgs.iter().enumerate() {
        let h = Header::peek(m).unwrap();
        assert_eq!(h.length as usize, m.len());
        assert_eq!((h.kind, h.xid), (t::MULTIPART_REPLY, 9));
        let more = u16::from_be_bytes([m[10], m[11]]);
        assert_eq!(more == mp::MORE, i + 1 < msgs.len());
        total += m.len() - 16;
    }
    assert_eq!(total, 200_000);
    // No entries: one empty reply.
    assert_eq!(multipart_reply(1, mp::TABLE, &[]).len(), 1);
}

#[test]
fn mpls_and_ttl_actions_round_trip() {
    let acts = vec![
        Action::PushMpls(0x8847),
        Action::SetMplsTtl(9),
        Action::DecMplsTtl,
        Action::CopyTtlOut,
        Action::CopyTtlIn,
        Action::PopMpls(0x0800),
        Action::SetNwTtl(3),
        Action::SetField(Oxm::exact(oxm::MPLS_LABEL, 0xf_ffff)),
        Action::SetField(Oxm::exact(oxm::IPV6_ND_TARGET, 0x20 << 120)),
        Action::SetField(Oxm::exact(oxm::TUNNEL_ID, 12345)),
    ];
    let fm = FlowMod {
        cookie: 1,
        cookie_mask: 0,
        table_id: 0,
        command: fc::ADD,
        idle_timeout: 0,
        hard_timeout: 0,
        priority: 5,
        buffer_id: NO_BUFFER,
        out_port: port::ANY,
        out_group: GROUP_ANY,
        flags: 0,
        matches: vec![Oxm::exact(oxm::ETH_TYPE, 0x8847)],
        instructions: vec![
            Instruction::Meter(4),
            Instruction::ApplyActions(acts),
            Instruction::WriteMetadata(0x10, 0xff),
        ],
    };
    let b = encode::flow_mod(3, &fm);
    assert_eq!(decode(&b).unwrap().1, Message::FlowMod(fm));
    // Each action has one length: a set-MPLS-TTL of 16 bytes is refused.
    let bad = [
        0, 4, 0, 24, 0, 0, 0, 0, 0, 15, 0, 16, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];
    assert_eq!(
        err_of(&with_instructions(&bad)),
        OfpError::new(et::BAD_ACTION, bac::BAD_LEN)
    );
}
