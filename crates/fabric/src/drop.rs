//! Named drop reasons. Every packet the switch does not deliver is counted
//! under exactly one of these, so received = forwarded + dropped by reason.

/// Why a packet (or one copy of it, for flood and groups) was not delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[repr(u8)]
pub enum DropReason {
    /// Shorter than an Ethernet header (14 bytes).
    Runt = 0,
    /// Longer than the destination can carry.
    Oversize,
    /// Destination ring full.
    TxFull,
    /// The logic sent it back to its ingress port.
    Hairpin,
    /// The logic named a port or group that does not exist.
    NoPort,
    /// The destination's peer is not attached.
    LinkDown,
    /// No rule matched (l4filter, flows with a drop miss).
    NoMatch,
    /// An explicit drop action or policy of the logic.
    Policy,
    /// Headers the logic needed could not be parsed (truncated IP, bad VLAN).
    Malformed,
    /// Output verification failed: the port sent from a tuple it does not own.
    Spoofed,
    /// The logic had nowhere to send it (e.g. flood on a single-port switch).
    NoDestination,
    /// Reserved on the destination, then refused because its peer broke the
    /// protocol (memif violation, vhost-user guest lie or too-small buffer).
    PeerFault,
    /// Reserved on the destination, then refused because the peer's session
    /// ended or was replaced before the frame was written (reconnect).
    TxStale,
    /// Handed to the kernel, which refused it (TAP write error, AF_PACKET
    /// `TP_STATUS_WRONG_FORMAT`).
    TxError,
    /// Handed to the OpenFlow controller as a packet-in (the `controller`
    /// action of `flows`): delivered to the control plane, not to a port.
    ToController,
    /// Meant for the controller, but the packet-in queue was full.
    ControllerQueueFull,
    /// Meant for the controller, over the packet-in rate limit.
    ControllerRateLimit,
    /// Meant for the controller, but no controller is connected.
    NoController,
    /// The logic had to lengthen the frame (push a VLAN or MPLS tag), or
    /// copy it (an output before a header change), and its batch's
    /// scratch memory was used up (`PktMut::insert`, `PktMut::copy_out`).
    NoRoom,
    /// Over the rate of an OpenFlow meter's drop band (the `flows` logic).
    Meter,
}

impl DropReason {
    /// Number of reasons (size of counter arrays).
    pub const COUNT: usize = 20;

    /// Every reason, in counter order.
    pub const ALL: [DropReason; Self::COUNT] = [
        DropReason::Runt,
        DropReason::Oversize,
        DropReason::TxFull,
        DropReason::Hairpin,
        DropReason::NoPort,
        DropReason::LinkDown,
        DropReason::NoMatch,
        DropReason::Policy,
        DropReason::Malformed,
        DropReason::Spoofed,
        DropReason::NoDestination,
        DropReason::PeerFault,
        DropReason::TxStale,
        DropReason::TxError,
        DropReason::ToController,
        DropReason::ControllerQueueFull,
        DropReason::ControllerRateLimit,
        DropReason::NoController,
        DropReason::NoRoom,
        DropReason::Meter,
    ];

    /// Stable lower-case name used in stats and metrics.
    pub fn name(self) -> &'static str {
        match self {
            DropReason::Runt => "runt",
            DropReason::Oversize => "oversize",
            DropReason::TxFull => "tx_full",
            DropReason::Hairpin => "hairpin",
            DropReason::NoPort => "no_port",
            DropReason::LinkDown => "link_down",
            DropReason::NoMatch => "no_match",
            DropReason::Policy => "policy",
            DropReason::Malformed => "malformed",
            DropReason::Spoofed => "spoofed",
            DropReason::NoDestination => "no_destination",
            DropReason::PeerFault => "peer_fault",
            DropReason::TxStale => "tx_stale",
            DropReason::TxError => "tx_error",
            DropReason::ToController => "to_controller",
            DropReason::ControllerQueueFull => "controller_queue_full",
            DropReason::ControllerRateLimit => "controller_rate_limit",
            DropReason::NoController => "no_controller",
            DropReason::NoRoom => "no_room",
            DropReason::Meter => "meter",
        }
    }

    /// Index into counter arrays.
    #[inline]
    pub fn index(self) -> usize {
        self as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_is_in_index_order_and_names_are_unique() {
        for (i, r) in DropReason::ALL.iter().enumerate() {
            assert_eq!(r.index(), i);
        }
        let mut names: Vec<_> = DropReason::ALL.iter().map(|r| r.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), DropReason::COUNT);
    }
}
