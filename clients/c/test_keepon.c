/*
 * test_keepon.c — tests of the C client, run by python/tests/test_c_client.py (`make test`).
 *
 *     keepon-test                 codec checks only (no daemon)
 *     keepon-test SOCKET          codec checks, then against a running daemon with the test configuration of
 *                                 python/tests/daemon_support.py (tc-0 owns ring slot 0, tc-1 is forbidden to
 *                                 this uid, tc-2 is best effort; 100 Mb/s, 1230-byte slots, ring 32, in-flight 64)
 *
 * Every submit must get exactly one outcome, rejections the expected reason code, malformed requests a
 * KEEPON_EREQUEST with the daemon's text. Lines `good TAG TXTIME sent TIME RING_SLOT` / `good TAG TXTIME rejected
 * REASON` report the on-time frames for the caller, which judges their timing against the daemon's underrun
 * count. Exit status 0 when every check passed.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keepon.h"

static int failures;

#define CHECK(cond, ...)                                                                                           \
    do {                                                                                                           \
        if (!(cond)) {                                                                                             \
            failures++;                                                                                            \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                                        \
            fprintf(stderr, __VA_ARGS__);                                                                          \
            fprintf(stderr, "\n");                                                                                 \
        }                                                                                                          \
    } while (0)

static void put64(uint8_t *b, uint64_t v) {
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
}

static size_t outcome_bytes(uint8_t *b, int status, int reason, uint64_t tag, uint64_t slot, int64_t time,
                            uint32_t ring) {
    memset(b, 0, 32);
    b[0] = 1;
    b[1] = 0x82;
    b[2] = (uint8_t)status;
    b[3] = (uint8_t)reason;
    put64(b + 4, tag);
    put64(b + 12, slot);
    put64(b + 20, (uint64_t)time);
    for (int i = 0; i < 4; i++) b[28 + i] = (uint8_t)(ring >> (8 * i));
    return 32;
}

static void codec_checks(void) {
    uint8_t buf[4 + KEEPON_MAX_MESSAGE];
    const uint8_t payload[3] = {1, 2, 3};
    /* The byte literal of the Rust test `requests_round_trip_and_byte_literal`. */
    long n = keepon_encode_submit(buf, sizeof buf, "tc-0", 1000, payload, 3, 7);
    const uint8_t want[] = {27, 0, 0, 0, 1, 2, 1, 4, 7, 0, 0, 0, 0, 0, 0, 0, 0xe8, 3, 0, 0, 0, 0, 0, 0,
                            't', 'c', '-', '0', 1, 2, 3};
    CHECK(n == (long)sizeof want && memcmp(buf, want, sizeof want) == 0, "submit bytes (n=%ld)", n);
    n = keepon_encode_submit(buf, sizeof buf, "tc-2", KEEPON_NO_TXTIME, payload, 3, 1);
    CHECK(n > 0 && buf[6] == 0 && buf[16] == 0, "best effort has no txtime flag");
    char longname[300];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    CHECK(keepon_encode_submit(buf, sizeof buf, longname, 0, payload, 3, 1) == KEEPON_EINVAL, "class over 255");
    static uint8_t big[17000];
    CHECK(keepon_encode_submit(buf, sizeof buf, "tc-0", 0, big, sizeof big, 1) == KEEPON_EINVAL, "message too big");
    CHECK(keepon_encode_info(buf, sizeof buf) == 6 && buf[0] == 2 && buf[4] == 1 && buf[5] == 1, "info bytes");

    struct keepon_msg m;
    struct keepon_info info;
    uint8_t b[64];
    outcome_bytes(b, 0, 0, 9, 5, -3, 1);
    CHECK(keepon_parse(b, 32, &m, NULL) == KEEPON_OK && m.kind == KEEPON_MSG_OUTCOME && m.outcome.sent &&
              !m.outcome.off_schedule && m.outcome.tag == 9 && m.outcome.slot == 5 && m.outcome.time == -3 &&
              m.outcome.ring_slot == 1,
          "sent outcome");
    outcome_bytes(b, 2, 0, 3, 7, 700, 2);
    CHECK(keepon_parse(b, 32, &m, NULL) == KEEPON_OK && m.outcome.sent && m.outcome.off_schedule &&
              m.outcome.status == KEEPON_SENT_OFF_SCHEDULE && m.outcome.time == 700,
          "status 2: sent off schedule");
    outcome_bytes(b, 1, KEEPON_R_FORBIDDEN, 4, 0, 0, 0);
    CHECK(keepon_parse(b, 32, &m, NULL) == KEEPON_OK && !m.outcome.sent && m.outcome.reason == KEEPON_R_FORBIDDEN,
          "rejected outcome");
    outcome_bytes(b, 1, 200, 5, 0, 0, 0);
    char why[32];
    CHECK(keepon_parse(b, 32, &m, NULL) == KEEPON_OK && m.outcome.reason == 200 &&
              strcmp(keepon_reason_str(m.outcome.reason, why, sizeof why), "unknown(200)") == 0 &&
              keepon_reason_name(200) == NULL,
          "unknown reason code: %s", why);
    CHECK(strcmp(keepon_reason_name(KEEPON_R_SHUTDOWN), "shutdown") == 0 &&
              strcmp(keepon_reason_name(KEEPON_R_NOT_OWNED), "not-owned") == 0,
          "reason names");
    outcome_bytes(b, 3, 0, 6, 0, 0, 0);
    CHECK(keepon_parse(b, 32, &m, NULL) == KEEPON_EPROTO && strstr(m.text, "frame 6: unknown status 3"),
          "unknown status: %s", m.text);
    outcome_bytes(b, 0, 0, 1, 2, 3, 4);
    CHECK(keepon_parse(b, 34, &m, NULL) == KEEPON_OK && m.outcome.tag == 1, "longer outcome accepted");
    CHECK(keepon_parse(b, 31, &m, NULL) == KEEPON_EPROTO, "short outcome refused");
    uint8_t ib[64] = {1, 0x81};
    put64(ib + 2, 100000000);
    ib[10] = 0xce; /* 1230 */
    ib[11] = 0x04;
    ib[14] = 32;
    ib[18] = 8;
    put64(ib + 22, 5);
    put64(ib + 30, 6);
    memcpy(ib + 38, "\x01" "a" "\x02" "bb", 5);
    CHECK(keepon_parse(ib, 43, &m, &info) == KEEPON_OK && m.kind == KEEPON_MSG_INFO && info.slot_bytes == 1230 &&
              info.ring == 32 && info.batch == 8 && info.now == 5 && info.cycle_start == 6 && info.nclasses == 2 &&
              strcmp(keepon_info_class(&info, 1), "bb") == 0 && keepon_info_class(&info, 2) == NULL,
          "info");
    CHECK(keepon_parse(ib, 42, &m, &info) == KEEPON_EPROTO, "class name cut short");
    CHECK(keepon_parse(ib, 37, &m, &info) == KEEPON_EPROTO, "info too short");
    const uint8_t err[] = {1, 0x83, 'b', 'a', 'd'};
    CHECK(keepon_parse(err, sizeof err, &m, NULL) == KEEPON_OK && m.kind == KEEPON_MSG_ERROR &&
              strcmp(m.text, "bad") == 0,
          "error reply");
    const uint8_t newer[] = {1, 0x85, 9};
    CHECK(keepon_parse(newer, sizeof newer, &m, NULL) == KEEPON_OK && m.kind == KEEPON_MSG_UNKNOWN &&
              m.raw_kind == 0x85,
          "unknown kind");
    const uint8_t v2[] = {2, 0x82};
    CHECK(keepon_parse(v2, 2, &m, NULL) == KEEPON_EPROTO && keepon_parse(v2, 1, &m, NULL) == KEEPON_EPROTO,
          "version / header");
    /* Random bytes: only OK or EPROTO, never a read outside the buffer (the Makefile builds this test with
     * AddressSanitizer and UBSan where the compiler has them). */
    uint32_t x = 12345;
    for (int round = 0; round < 100000; round++) {
        uint8_t r[48];
        size_t len = (x = x * 1103515245u + 12345u) >> 16 & 47;
        for (size_t i = 0; i < len; i++) r[i] = (uint8_t)((x = x * 1103515245u + 12345u) >> 16);
        if (len >= 2 && (round & 1)) {
            r[0] = 1;
            r[1] = (uint8_t)(0x81 + round % 3);
        }
        uint8_t *heap = malloc(len ? len : 1);
        memcpy(heap, r, len);
        int rc = keepon_parse(heap, len, &m, &info);
        CHECK(rc == KEEPON_OK || rc == KEEPON_EPROTO, "parse returned %d", rc);
        free(heap);
    }
}

#define SLOT ((int64_t)100000)
#define CYCLE (32 * SLOT)

struct bad {
    uint64_t tag;
    const char *cls;
    int64_t txtime;
    size_t len;
    unsigned reason;
};

static void frame(uint8_t *f, size_t len, uint64_t seq) {
    memset(f, 0, len);
    const uint8_t head[14] = {2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x88, 0xb5};
    memcpy(f, head, len < 14 ? len : 14);
    if (len >= 22) put64(f + 14, seq);
}

static void daemon_checks(const char *path) {
    keepon_client *c = keepon_connect(path);
    CHECK(c != NULL, "connect %s", path);
    if (!c) return;
    keepon_set_timeout(c, 10000);
    struct keepon_info info;
    int rc = keepon_info(c, &info);
    CHECK(rc == KEEPON_OK, "info: %s", keepon_strerror(c, rc));
    if (rc != KEEPON_OK) {
        keepon_close(c);
        return;
    }
    CHECK(info.rate_bps == 100000000 && info.slot_bytes == 1230 && info.ring == 32 && info.batch == 8 &&
              info.nclasses == 3 && strcmp(keepon_info_class(&info, 2), "tc-2") == 0 &&
              info.cycle_start > info.now,
          "info fields");

    uint8_t f[2000];
    int64_t first = info.cycle_start + 10 * CYCLE;
    enum { GOOD = 20, BE = 5 };
    for (int i = 0; i < GOOD; i++) {
        frame(f, 100, (uint64_t)i);
        rc = keepon_submit(c, "tc-0", first + i * CYCLE, f, 100, (uint64_t)i);
        CHECK(rc == KEEPON_OK, "submit %d: %s", i, keepon_strerror(c, rc));
    }
    const struct bad bad[] = {
        {100, "tc-0", info.now - 1000000, 1000, KEEPON_R_LATE},
        {101, "tc-0", first + 5 * SLOT, 100, KEEPON_R_NOT_OWNED},
        {102, "tc-1", first + SLOT, 100, KEEPON_R_FORBIDDEN},
        {103, "tc-9", first, 100, KEEPON_R_UNKNOWN_CLASS},
        {104, "tc-0", first + 40 * CYCLE, 2000, KEEPON_R_OVERSIZE},
        {105, "tc-0", KEEPON_NO_TXTIME, 100, KEEPON_R_MISSING_TXTIME},
        {106, "tc-2", first, 100, KEEPON_R_UNEXPECTED_TXTIME},
        {107, "tc-0", info.now + (int64_t)5000000000, 100, KEEPON_R_TOO_FAR_AHEAD},
        {108, "tc-0", first + 2 * CYCLE, 10, KEEPON_R_RUNT},
    };
    const int NBAD = (int)(sizeof bad / sizeof bad[0]);
    for (int i = 0; i < NBAD; i++) {
        frame(f, bad[i].len, bad[i].tag);
        rc = keepon_submit(c, bad[i].cls, bad[i].txtime, f, bad[i].len, bad[i].tag);
        CHECK(rc == KEEPON_OK, "submit %" PRIu64 ": %s", bad[i].tag, keepon_strerror(c, rc));
    }
    for (int i = 0; i < BE; i++) {
        frame(f, 200, 200 + (uint64_t)i);
        rc = keepon_submit(c, "tc-2", KEEPON_NO_TXTIME, f, 200, 200 + (uint64_t)i);
        CHECK(rc == KEEPON_OK, "submit best effort: %s", keepon_strerror(c, rc));
    }
    /* A malformed submit (an unknown flag bit): an error, not an outcome. */
    uint8_t raw[4 + KEEPON_MAX_MESSAGE];
    frame(f, 100, 300);
    long n = keepon_encode_submit(raw, sizeof raw, "tc-0", first, f, 100, 300);
    raw[6] |= 0x80;
    CHECK(keepon_send_raw(c, raw, (size_t)n) == KEEPON_OK, "send raw");

    /* Collect: exactly one outcome per tag; the one error reply in between. */
    enum { MAXTAG = 301 };
    static struct keepon_outcome got[MAXTAG];
    static int seen[MAXTAG];
    int outcomes = 0, errors = 0, expected = GOOD + NBAD + BE;
    while (outcomes < expected) {
        struct keepon_outcome o;
        rc = keepon_outcome(c, &o);
        if (rc == KEEPON_EREQUEST) {
            errors++;
            CHECK(strcmp(keepon_strerror(c, rc), "submit flags 0x81 has unknown bits") == 0, "error text: %s",
                  keepon_strerror(c, rc));
            continue;
        }
        CHECK(rc == KEEPON_OK, "outcome %d of %d: %s", outcomes, expected, keepon_strerror(c, rc));
        if (rc != KEEPON_OK) break;
        CHECK(o.tag < MAXTAG && !seen[o.tag], "outcome for tag %" PRIu64 " unexpected or twice", o.tag);
        if (o.tag < MAXTAG) {
            seen[o.tag]++;
            got[o.tag] = o;
        }
        outcomes++;
    }
    CHECK(errors == 1, "%d error replies", errors);
    CHECK(!seen[300], "the malformed submit got an outcome");
    for (int i = 0; i < NBAD; i++) {
        const struct keepon_outcome *o = &got[bad[i].tag];
        char a[32], b[32];
        CHECK(seen[bad[i].tag] && !o->sent && o->reason == bad[i].reason, "frame %" PRIu64 ": %s, expected %s",
              bad[i].tag, o->sent ? "sent" : keepon_reason_str(o->reason, a, sizeof a),
              keepon_reason_str(bad[i].reason, b, sizeof b));
    }
    for (int i = 0; i < BE; i++) {
        const struct keepon_outcome *o = &got[200 + i];
        CHECK(o->sent && o->ring_slot != 0 && o->ring_slot != 1 && o->ring_slot != 17,
              "best effort %d: sent %d ring slot %u", i, o->sent, o->ring_slot);
    }
    for (int i = 0; i < GOOD; i++) {
        const struct keepon_outcome *o = &got[i];
        char a[32];
        if (o->sent)
            printf("good %d %" PRId64 " sent %" PRId64 " %u\n", i, first + i * CYCLE, o->time, o->ring_slot);
        else
            printf("good %d %" PRId64 " rejected %s\n", i, first + i * CYCLE, keepon_reason_str(o->reason, a, sizeof a));
    }
    rc = keepon_info(c, &info);
    CHECK(rc == KEEPON_OK && info.ring == 32, "usable after the malformed request: %s", keepon_strerror(c, rc));

    /* A timeout is reported, and the connection stays usable. */
    keepon_set_timeout(c, 50);
    struct keepon_outcome o;
    rc = keepon_outcome(c, &o);
    CHECK(rc == KEEPON_ETIMEDOUT, "no outcome pending: %d", rc);
    keepon_set_timeout(c, 10000);
    CHECK(keepon_info(c, &info) == KEEPON_OK, "usable after a timeout");
    keepon_close(c);

    /* Broken framing: an error, then the daemon closes the connection. */
    keepon_client *b = keepon_connect(path);
    CHECK(b != NULL, "connect");
    if (!b) return;
    keepon_set_timeout(b, 10000);
    const uint8_t broken[] = {0xff, 0xff, 0xff, 0x7f, 1, 2, 3};
    keepon_send_raw(b, broken, sizeof broken);
    rc = keepon_outcome(b, &o);
    CHECK(rc == KEEPON_EREQUEST && strstr(keepon_strerror(b, rc), "closing"), "broken framing: %d %s", rc,
          keepon_strerror(b, rc));
    rc = keepon_outcome(b, &o);
    CHECK(rc == KEEPON_ECLOSED, "then closed: %d", rc);
    keepon_close(b);
}

int main(int argc, char **argv) {
    codec_checks();
    if (argc > 1) daemon_checks(argv[1]);
    if (failures) {
        fprintf(stderr, "%d checks failed\n", failures);
        return 1;
    }
    fprintf(stderr, "all checks passed\n");
    return 0;
}
