/*
 * ip_low8 — the mSwitch paper's example switching logic as a turnoutd
 * plug-in: the output port is the low 8 bits of the destination IPv4
 * address (plus an optional base), so 10.0.0.3 goes to port 3.
 *
 * Config string: "" or "base=N" (0 <= N <= 65279): port = N + low 8 bits.
 * Frames that are not IPv4 (after at most one VLAN tag) or too short for
 * an IPv4 header are dropped as "no_match" / "malformed".
 *
 * Build: cc -shared -fPIC -O2 -I include -o libip_low8.so plugins/ip_low8.c
 */
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include "turnout_logic.h"

struct state {
    uint32_t base;
};

uint32_t turnout_logic_abi_version(void)
{
    return TURNOUT_LOGIC_ABI_VERSION;
}

void *turnout_logic_init(const char *config, char *err, uint32_t errlen)
{
    unsigned long base = 0;
    if (config != NULL && config[0] != '\0') {
        char *end = NULL;
        if (strncmp(config, "base=", 5) != 0 || config[5] < '0' || config[5] > '9') {
            if (err != NULL && errlen > 0)
                snprintf(err, errlen, "ip_low8: expected \"base=N\", got \"%s\"", config);
            return NULL;
        }
        base = strtoul(config + 5, &end, 10);
        if (*end != '\0' || base > 65279) {
            if (err != NULL && errlen > 0)
                snprintf(err, errlen, "ip_low8: base must be an integer in 0..65279");
            return NULL;
        }
    }
    struct state *s = malloc(sizeof *s);
    if (s == NULL) {
        if (err != NULL && errlen > 0)
            snprintf(err, errlen, "ip_low8: out of memory");
        return NULL;
    }
    s->base = (uint32_t)base;
    return s;
}

void turnout_logic_classify(void *state, uint16_t ingress, const struct tl_pkt *pkts, uint32_t n,
                            struct tl_verdict *out)
{
    const struct state *s = state;
    (void)ingress;
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *d = pkts[i].data;
        uint32_t len = pkts[i].len, l3 = 14;
        uint16_t et = (uint16_t)(d[12] << 8 | d[13]);
        if (et == 0x8100 && len >= 18) {
            et = (uint16_t)(d[16] << 8 | d[17]);
            l3 = 18;
        }
        if (et != 0x0800) {
            out[i].kind = TL_DROP;
            out[i].arg = TL_DROP_NO_MATCH;
        } else if (len < l3 + 20 || (d[l3] >> 4) != 4) {
            out[i].kind = TL_DROP;
            out[i].arg = TL_DROP_MALFORMED;
        } else {
            out[i].kind = TL_PORT;
            out[i].arg = s->base + d[l3 + 19];
        }
    }
}

void turnout_logic_destroy(void *state)
{
    free(state);
}
