/*
 * turnout_logic.h — the C ABI of turnoutd plug-in switching logics.
 *
 * A plug-in is a shared library exporting the four functions below. turnoutd
 * loads it with dlopen (logic "plugin", config {"path": ..., "config": ...}),
 * refuses it if turnout_logic_abi_version() differs from
 * TURNOUT_LOGIC_ABI_VERSION or a symbol is missing, then calls init once,
 * classify for every batch, and destroy once when the logic is replaced.
 *
 * Rules for classify (the data path):
 *  - it is called concurrently by every switch worker with the same state:
 *    keep the state read-only after init, or synchronise it yourself
 *    (atomics; never a lock that can block);
 *  - it must set out[i] for every 0 <= i < n, must not allocate, block,
 *    make system calls, or keep pointers to packet data after returning;
 *  - pkts[i].data is valid for pkts[i].len bytes (>= 14, an Ethernet
 *    header is always present) and may be rewritten in place (NAT, MAC
 *    rewrite); the length cannot change.
 *
 * A verdict with an unknown kind, or a drop with an unknown reason, is
 * counted by the switch as a drop with reason "no_port" / "policy".
 * Build: cc -shared -fPIC -O2 -I include -o libmine.so mine.c
 */
#ifndef TURNOUT_LOGIC_H
#define TURNOUT_LOGIC_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped on any incompatible change of this file. */
#define TURNOUT_LOGIC_ABI_VERSION 1u

/* One received frame. */
struct tl_pkt {
    uint8_t *data;   /* frame bytes, Ethernet header first */
    uint32_t len;    /* frame length in bytes, without FCS */
    uint16_t port;   /* ingress port (same for every packet of a call) */
    uint16_t queue;  /* ingress queue */
};

/* Verdict kinds. */
#define TL_PORT  0u  /* arg = output port */
#define TL_FLOOD 1u  /* every port but the ingress; arg ignored */
#define TL_DROP  2u  /* arg = one of the TL_DROP_* reasons */

/* Drop reasons a logic may give (the switch's counter names in quotes). */
#define TL_DROP_NO_MATCH       6u   /* "no_match": no rule matched */
#define TL_DROP_POLICY         7u   /* "policy": dropped on purpose */
#define TL_DROP_MALFORMED      8u   /* "malformed": headers unparsable */
#define TL_DROP_SPOOFED        9u   /* "spoofed": output verification failed */
#define TL_DROP_NO_DESTINATION 10u  /* "no_destination": nowhere to send it */

struct tl_verdict {
    uint32_t kind;  /* TL_PORT, TL_FLOOD or TL_DROP */
    uint32_t arg;   /* port or drop reason */
};

/* Must return TURNOUT_LOGIC_ABI_VERSION. */
uint32_t turnout_logic_abi_version(void);

/* Parses config (a NUL-terminated string, possibly empty) and returns the
 * plug-in's state, or NULL to refuse the configuration. If err is not NULL
 * on a refusal, a message (at most errlen bytes with its NUL) explains why. */
void *turnout_logic_init(const char *config, char *err, uint32_t errlen);

/* Classifies n frames received on port `ingress` into out[0..n). */
void turnout_logic_classify(void *state, uint16_t ingress, const struct tl_pkt *pkts, uint32_t n,
                            struct tl_verdict *out);

/* Frees the state; no classify call is running or will follow. */
void turnout_logic_destroy(void *state);

#ifdef __cplusplus
}
#endif

#endif /* TURNOUT_LOGIC_H */
