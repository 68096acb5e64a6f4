/*
 * example.c — print the link and the station's network time, send frames in ring slot 0 of the next cycles
 * through keepon, print each frame's outcome.
 *
 *     example SOCKET CLASS COUNT
 *
 * Build: `make c-client` (target/c/keepon-example). Exit status 0 when every frame got its outcome.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keepon.h"

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s SOCKET CLASS COUNT\n", argv[0]);
        return 2;
    }
    int count = atoi(argv[3]);
    keepon_client *c = keepon_connect(argv[1]);
    if (!c) {
        perror("keepon_connect");
        return 1;
    }
    keepon_set_timeout(c, 10000);
    struct keepon_info info;
    int rc = keepon_info(c, &info);
    if (rc != KEEPON_OK) {
        fprintf(stderr, "info: %s\n", keepon_strerror(c, rc));
        keepon_close(c);
        return 1;
    }
    /* One cycle = ring slots of (slot_bytes + 20)·8 bits at the line rate. */
    int64_t cycle = (int64_t)((uint64_t)info.ring * (info.slot_bytes + 20) * 8 * 1000000000ull / info.rate_bps);
    printf("link %" PRIu64 " b/s, %u-byte slots, ring %u, cycle %" PRId64 " ns, classes:", info.rate_bps,
           info.slot_bytes, info.ring, cycle);
    for (unsigned i = 0; i < info.nclasses; i++) printf(" %s", keepon_info_class(&info, i));
    printf("\n");
    struct keepon_time t;
    rc = keepon_time(c, &t);
    if (rc != KEEPON_OK) {
        fprintf(stderr, "time: %s\n", keepon_strerror(c, rc));
        keepon_close(c);
        return 1;
    }
    printf("network time %" PRId64 " ns (EPHC - host CLOCK_TAI %+" PRId64 " ns), %s\n", t.ephc_now,
           t.ephc_now - t.host_now, keepon_sync_name((unsigned)t.sync));

    uint8_t frame[100] = {0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x88, 0xb5};
    for (int k = 0; k < count; k++) {
        int64_t txtime = info.cycle_start + (int64_t)(k + 1) * cycle;
        memcpy(frame + 14, &k, sizeof k);
        rc = keepon_submit(c, argv[2], txtime, frame, sizeof frame, (uint64_t)k);
        if (rc != KEEPON_OK) {
            fprintf(stderr, "submit: %s\n", keepon_strerror(c, rc));
            keepon_close(c);
            return 1;
        }
    }
    for (int k = 0; k < count; k++) {
        struct keepon_outcome o;
        rc = keepon_outcome(c, &o);
        if (rc != KEEPON_OK) {
            fprintf(stderr, "outcome: %s\n", keepon_strerror(c, rc));
            keepon_close(c);
            return 1;
        }
        char why[32];
        if (o.sent)
            printf("frame %" PRIu64 ": sent in slot %" PRIu64 " (ring slot %u) at %" PRId64 " ns%s\n", o.tag, o.slot,
                   o.ring_slot, o.time, o.off_schedule ? ", off schedule" : "");
        else
            printf("frame %" PRIu64 ": rejected, %s\n", o.tag, keepon_reason_str(o.reason, why, sizeof why));
    }
    keepon_close(c);
    return 0;
}
