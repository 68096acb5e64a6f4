/*
 * test_keepon.c — tests of the C client, run by python/tests/test_c_client.py (`make test`).
 *
 *     keepon-test                 codec checks, and the client against a scripted peer on a socket (no daemon)
 *     keepon-test SOCKET          the same, then against a running daemon with the test configuration of
 *                                 python/tests/daemon_support.py (tc-0 owns ring slot 0, tc-1 is forbidden to
 *                                 this uid, tc-2 is best effort; 100 Mb/s, 1230-byte slots, ring 32, in-flight 64)
 *
 * Every submit must get exactly one outcome, rejections the expected reason code, malformed requests a
 * KEEPON_EREQUEST with the daemon's text. Lines `good TAG TXTIME sent TIME RING_SLOT` / `good TAG TXTIME rejected
 * REASON` report the on-time frames for the caller, which judges their timing against the daemon's underrun
 * count. Exit status 0 when every check passed.
 */
#define _DEFAULT_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

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

/* A Time reply body: state bytes, flags, then ephc_now, host_now, offset, freq_ppt, path_delay, align_p50,
 * align_p99, align_max. */
static size_t time_bytes(uint8_t *b, int sync, int port, int servo, int flags, const int64_t v[8]) {
    b[0] = 1;
    b[1] = 0x84;
    b[2] = (uint8_t)sync;
    b[3] = (uint8_t)port;
    b[4] = (uint8_t)servo;
    b[5] = (uint8_t)flags;
    for (int i = 0; i < 8; i++) put64(b + 6 + 8 * i, (uint64_t)v[i]);
    return 70;
}

static void time_codec_checks(void) {
    uint8_t buf[16];
    CHECK(keepon_encode_time(buf, sizeof buf) == 6 && memcmp(buf, "\x02\x00\x00\x00\x01\x03", 6) == 0,
          "time request bytes");
    CHECK(keepon_encode_time(buf, 5) == KEEPON_EINVAL, "time request needs 6 bytes");

    struct keepon_msg m;
    uint8_t b[80];
    /* The values of the Rust test `responses_round_trip`: a locked slave (alignment bytes set but not valid). */
    const int64_t v[8] = {1700000000000000123, -5, -42, 50000000, 3100, 1, 7, 9};
    size_t n = time_bytes(b, KEEPON_SYNC_SYNCHRONISED, KEEPON_PORT_SLAVE, KEEPON_SERVO_LOCKED, 3, v);
    CHECK(keepon_parse(b, n, &m, NULL) == KEEPON_OK && m.kind == KEEPON_MSG_TIME && m.raw_kind == 0x84 &&
              m.time.sync == KEEPON_SYNC_SYNCHRONISED && m.time.port == KEEPON_PORT_SLAVE &&
              m.time.servo == KEEPON_SERVO_LOCKED &&
              m.time.flags == (KEEPON_TIME_OFFSET_VALID | KEEPON_TIME_PATH_DELAY_VALID) &&
              m.time.ephc_now == 1700000000000000123 && m.time.host_now == -5 && m.time.offset == -42 &&
              m.time.freq_ppt == 50000000 && m.time.path_delay == 3100 && m.time.align_p50 == 0 &&
              m.time.align_p99 == 0 && m.time.align_max == 0,
          "time reply: %d %d %d %u %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64, m.time.sync,
          m.time.port, m.time.servo, m.time.flags, m.time.ephc_now, m.time.host_now, m.time.offset,
          m.time.freq_ppt, m.time.path_delay);
    /* Flags clear: offset and path delay are not estimates, whatever the bytes say. */
    n = time_bytes(b, KEEPON_SYNC_FREE_RUNNING, KEEPON_PORT_NONE, KEEPON_SERVO_UNLOCKED, 0, v);
    CHECK(keepon_parse(b, n, &m, NULL) == KEEPON_OK && m.time.sync == KEEPON_SYNC_FREE_RUNNING &&
              m.time.flags == 0 && m.time.offset == 0 && m.time.path_delay == 0 && m.time.freq_ppt == 50000000,
          "free-running time reply");
    n = time_bytes(b, KEEPON_SYNC_NOT_SYNCHRONISED, KEEPON_PORT_MASTER, KEEPON_SERVO_STEPPING,
                   KEEPON_TIME_PATH_DELAY_VALID, v);
    CHECK(keepon_parse(b, n, &m, NULL) == KEEPON_OK && m.time.sync == KEEPON_SYNC_NOT_SYNCHRONISED &&
              m.time.port == KEEPON_PORT_MASTER && m.time.servo == KEEPON_SERVO_STEPPING && m.time.offset == 0 &&
              m.time.path_delay == 3100,
          "path delay alone");
    /* The alignment of the Rust test `responses_round_trip`: (1, 7, 9) with the alignment bit alone. */
    n = time_bytes(b, KEEPON_SYNC_FREE_RUNNING, KEEPON_PORT_NONE, KEEPON_SERVO_UNLOCKED, KEEPON_TIME_ALIGNMENT_VALID,
                   v);
    CHECK(n == 70 && keepon_parse(b, n, &m, NULL) == KEEPON_OK && m.time.flags == KEEPON_TIME_ALIGNMENT_VALID &&
              m.time.align_p50 == 1 && m.time.align_p99 == 7 && m.time.align_max == 9 && m.time.offset == 0 &&
              m.time.path_delay == 0,
          "alignment: %" PRId64 " %" PRId64 " %" PRId64, m.time.align_p50, m.time.align_p99, m.time.align_max);
    n = time_bytes(b, KEEPON_SYNC_SYNCHRONISED, KEEPON_PORT_SLAVE, KEEPON_SERVO_LOCKED, 7, v);
    CHECK(keepon_parse(b, n, &m, NULL) == KEEPON_OK && m.time.flags == 7 && m.time.offset == -42 &&
              m.time.path_delay == 3100 && m.time.align_max == 9,
          "every flag");
    /* Every truncation, and one byte too many, is a protocol error naming the length. */
    for (size_t cut = 0; cut < 70; cut++) {
        uint8_t *heap = malloc(cut ? cut : 1);
        memcpy(heap, b, cut);
        int rc = keepon_parse(heap, cut, &m, NULL);
        CHECK(rc == KEEPON_EPROTO && m.kind != KEEPON_MSG_TIME, "time reply cut to %zu bytes: %d", cut, rc);
        free(heap);
    }
    CHECK(keepon_parse(b, 69, &m, NULL) == KEEPON_EPROTO && strcmp(m.text, "time reply of 69 bytes, expected 70") == 0,
          "short time reply text: %s", m.text);
    CHECK(keepon_parse(b, 46, &m, NULL) == KEEPON_EPROTO && strcmp(m.text, "time reply of 46 bytes, expected 70") == 0,
          "the former 46-byte reply: %s", m.text);
    b[70] = 0;
    CHECK(keepon_parse(b, 71, &m, NULL) == KEEPON_EPROTO && strcmp(m.text, "time reply of 71 bytes, expected 70") == 0,
          "long time reply: %s", m.text);
    /* State bytes and flags outside the protocol. */
    const struct {
        int at, value;
        const char *text;
    } bad[] = {
        {2, 3, "time reply: unknown sync state 3"},
        {3, 3, "time reply: unknown port role 3"},
        {4, 255, "time reply: unknown servo state 255"},
        {5, 8, "time reply flags 0x08 has unknown bits"},
        {5, 0x0f, "time reply flags 0x0f has unknown bits"},
        {5, 0x81, "time reply flags 0x81 has unknown bits"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        time_bytes(b, 1, 2, 2, 3, v);
        b[bad[i].at] = (uint8_t)bad[i].value;
        CHECK(keepon_parse(b, 70, &m, NULL) == KEEPON_EPROTO && strcmp(m.text, bad[i].text) == 0,
              "byte %d = %d: %s", bad[i].at, bad[i].value, m.text);
    }
    CHECK(strcmp(keepon_sync_name(KEEPON_SYNC_FREE_RUNNING), "free-running") == 0 &&
              strcmp(keepon_sync_name(KEEPON_SYNC_SYNCHRONISED), "synchronised") == 0 &&
              strcmp(keepon_sync_name(KEEPON_SYNC_NOT_SYNCHRONISED), "not-synchronised") == 0 &&
              keepon_sync_name(3) == NULL,
          "sync names");
}

/* A Released body: flags (bit 0 valid, bit 1 stamped), tag, time. */
static size_t released_bytes(uint8_t *b, int flags, uint64_t tag, int64_t time) {
    memset(b, 0, 20);
    b[0] = 1;
    b[1] = 0x85;
    b[2] = (uint8_t)flags;
    put64(b + 4, tag);
    put64(b + 12, (uint64_t)time);
    return 20;
}

static void release_codec_checks(void) {
    uint8_t buf[16];
    /* The bytes of the Rust test `requests_round_trip_and_byte_literal`: [1, 4, 1]. */
    CHECK(keepon_encode_subscribe(buf, sizeof buf, KEEPON_SUBSCRIBE_RELEASE_TIMES) == 7 &&
              memcmp(buf, "\x03\x00\x00\x00\x01\x04\x01", 7) == 0,
          "subscribe request bytes");
    CHECK(keepon_encode_subscribe(buf, sizeof buf, 0) == 7 && buf[6] == 0, "unsubscribe");
    CHECK(keepon_encode_subscribe(buf, sizeof buf, 2) == KEEPON_EINVAL, "unknown subscribe flag");
    CHECK(keepon_encode_subscribe(buf, 6, 1) == KEEPON_EINVAL, "subscribe needs 7 bytes");

    struct keepon_msg m;
    uint8_t b[32];
    /* The values of the Rust test `released_byte_literal`. */
    size_t n = released_bytes(b, 3, 0x0102, -2);
    CHECK(keepon_parse(b, n, &m, NULL) == KEEPON_OK && m.kind == KEEPON_MSG_RELEASED && m.released.tag == 0x0102 &&
              m.released.valid && m.released.stamped && m.released.time == -2,
          "released, stamped");
    n = released_bytes(b, 0, 1, 77);
    CHECK(keepon_parse(b, n, &m, NULL) == KEEPON_OK && !m.released.valid && !m.released.stamped &&
              m.released.time == 0,
          "released without a time reads no time");
    n = released_bytes(b, 4, 1, 0);
    CHECK(keepon_parse(b, n, &m, NULL) == KEEPON_EPROTO && strcmp(m.text, "released flags 0x04 has unknown bits") == 0,
          "released flags: %s", m.text);
    released_bytes(b, 1, 1, 0);
    CHECK(keepon_parse(b, 19, &m, NULL) == KEEPON_EPROTO && strcmp(m.text, "released of 19 bytes, expected 20") == 0,
          "short released: %s", m.text);
    CHECK(keepon_parse(b, 21, &m, NULL) == KEEPON_EPROTO, "long released");
    const uint8_t sub[] = {1, 0x86, 1}, bad_sub[] = {1, 0x86, 2}, long_sub[] = {1, 0x86, 1, 0};
    CHECK(keepon_parse(sub, sizeof sub, &m, NULL) == KEEPON_OK && m.kind == KEEPON_MSG_SUBSCRIBED &&
              m.subscribed == KEEPON_SUBSCRIBE_RELEASE_TIMES,
          "subscribed");
    CHECK(keepon_parse(bad_sub, sizeof bad_sub, &m, NULL) == KEEPON_EPROTO &&
              keepon_parse(long_sub, sizeof long_sub, &m, NULL) == KEEPON_EPROTO,
          "malformed subscribed replies");
}

/* ---- the client against a scripted peer: a listening socket in a temporary directory ---------------------- */

struct peer {
    char dir[32];
    char path[64];
    int listen_fd, fd;
    keepon_client *c;
};

static int peer_open(struct peer *p) {
    memset(p, 0, sizeof *p);
    p->listen_fd = p->fd = -1;
    snprintf(p->dir, sizeof p->dir, "/tmp/keepon-test-XXXXXX");
    if (!mkdtemp(p->dir)) return -1;
    snprintf(p->path, sizeof p->path, "%s/peer.sock", p->dir);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", p->path);
    p->listen_fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (p->listen_fd < 0 || bind(p->listen_fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(p->listen_fd, 1) != 0)
        return -1;
    p->c = keepon_connect(p->path);
    if (!p->c) return -1;
    p->fd = accept(p->listen_fd, NULL, NULL);
    if (p->fd < 0) return -1;
    keepon_set_timeout(p->c, 5000);
    return 0;
}

static void peer_close(struct peer *p) {
    if (p->c) keepon_close(p->c);
    if (p->fd >= 0) close(p->fd);
    if (p->listen_fd >= 0) close(p->listen_fd);
    unlink(p->path);
    rmdir(p->dir);
}

/* The peer sends one length-prefixed message. */
static void peer_send(struct peer *p, const uint8_t *body, size_t n) {
    uint8_t m[4 + 128];
    for (int i = 0; i < 4; i++) m[i] = (uint8_t)(n >> (8 * i));
    memcpy(m + 4, body, n);
    CHECK(write(p->fd, m, 4 + n) == (ssize_t)(4 + n), "peer write: %s", strerror(errno));
}

/* The peer reads a request of n bytes and checks it is `want`. */
static void peer_expect(struct peer *p, const char *want, size_t n) {
    uint8_t req[16] = {0};
    size_t got = 0;
    while (got < n && n <= sizeof req) {
        ssize_t r = read(p->fd, req + got, n - got);
        if (r <= 0) break;
        got += (size_t)r;
    }
    CHECK(got == n && memcmp(req, want, n) == 0, "peer got %zu request bytes", got);
}

/* The peer reads the 6-byte Time request the client sent. */
static void peer_expect_time_request(struct peer *p) { peer_expect(p, "\x02\x00\x00\x00\x01\x03", 6); }

/* Subscribe against the scripted peer: the reply is taken out between outcomes and release times, which stay in
 * order for keepon_recv; keepon_outcome skips release times. */
static void subscribe_client_checks(void) {
    uint8_t b[64];
    struct peer p;
    CHECK(peer_open(&p) == 0, "scripted peer: %s", strerror(errno));
    if (p.fd < 0) {
        peer_close(&p);
        return;
    }
    peer_send(&p, b, outcome_bytes(b, KEEPON_SENT, 0, 41, 5, 500, 0));
    peer_send(&p, b, released_bytes(b, 3, 41, 512));
    const uint8_t yes[] = {1, 0x86, 1};
    peer_send(&p, yes, sizeof yes);
    peer_send(&p, b, outcome_bytes(b, KEEPON_SENT, 0, 42, 6, 600, 0));
    peer_send(&p, b, released_bytes(b, 0, 42, 0));
    unsigned now = 0;
    int rc = keepon_subscribe(p.c, KEEPON_SUBSCRIBE_RELEASE_TIMES, &now);
    CHECK(rc == KEEPON_OK && now == KEEPON_SUBSCRIBE_RELEASE_TIMES, "subscribe: %s", keepon_strerror(p.c, rc));
    peer_expect(&p, "\x03\x00\x00\x00\x01\x04\x01", 7);
    struct keepon_msg m;
    const int kinds[4] = {KEEPON_MSG_OUTCOME, KEEPON_MSG_RELEASED, KEEPON_MSG_OUTCOME, KEEPON_MSG_RELEASED};
    for (int i = 0; i < 4; i++) {
        rc = keepon_recv(p.c, &m, NULL);
        CHECK(rc == KEEPON_OK && m.kind == kinds[i], "message %d: rc %d kind %d", i, rc, m.kind);
    }
    CHECK(m.released.tag == 42 && !m.released.valid, "the last release time: not valid");
    /* keepon_outcome skips a release time. */
    peer_send(&p, b, released_bytes(b, 1, 43, 700));
    peer_send(&p, b, outcome_bytes(b, KEEPON_SENT, 0, 44, 7, 800, 0));
    struct keepon_outcome o;
    rc = keepon_outcome(p.c, &o);
    CHECK(rc == KEEPON_OK && o.tag == 44, "release time skipped by keepon_outcome: %d", rc);
    /* An older daemon: an error reply. Unknown flags are refused before anything is sent. */
    const uint8_t err[] = {1, 0x83, 'o', 'l', 'd'};
    peer_send(&p, err, sizeof err);
    rc = keepon_subscribe(p.c, KEEPON_SUBSCRIBE_RELEASE_TIMES, NULL);
    CHECK(rc == KEEPON_EREQUEST && strcmp(keepon_strerror(p.c, rc), "old") == 0, "older daemon: %d", rc);
    peer_expect(&p, "\x03\x00\x00\x00\x01\x04\x01", 7);
    CHECK(keepon_subscribe(p.c, 8, NULL) == KEEPON_EINVAL, "unknown subscribe flag");
    peer_close(&p);
}

static void time_client_checks(void) {
    const int64_t v[8] = {1700000000000000123, 1700000000000000100, -42, 50000000, 3100, 60, 250, 900};
    uint8_t b[80];
    struct keepon_time t;
    struct keepon_outcome o;
    struct peer p;

    /* Outcomes before and after the reply: the reply is taken, the outcomes stay in order. */
    CHECK(peer_open(&p) == 0, "scripted peer: %s", strerror(errno));
    if (p.fd < 0) {
        peer_close(&p);
        return;
    }
    peer_send(&p, b, outcome_bytes(b, KEEPON_SENT, 0, 11, 5, 500, 0));
    peer_send(&p, b, outcome_bytes(b, KEEPON_REJECTED, KEEPON_R_LATE, 12, 0, 0, 0));
    peer_send(&p, b, time_bytes(b, KEEPON_SYNC_SYNCHRONISED, KEEPON_PORT_SLAVE, KEEPON_SERVO_LOCKED, 7, v));
    peer_send(&p, b, outcome_bytes(b, KEEPON_SENT, 0, 13, 6, 600, 0));
    memset(&t, 0, sizeof t);
    int rc = keepon_time(p.c, &t);
    CHECK(rc == KEEPON_OK && t.sync == KEEPON_SYNC_SYNCHRONISED && t.port == KEEPON_PORT_SLAVE &&
              t.servo == KEEPON_SERVO_LOCKED && t.ephc_now == v[0] && t.host_now == v[1] && t.offset == -42 &&
              t.freq_ppt == 50000000 && t.path_delay == 3100 && t.align_p50 == 60 && t.align_p99 == 250 &&
              t.align_max == 900,
          "time after two outcomes: %s", keepon_strerror(p.c, rc));
    peer_expect_time_request(&p);
    const uint64_t want[3] = {11, 12, 13};
    for (int i = 0; i < 3; i++) {
        rc = keepon_outcome(p.c, &o);
        CHECK(rc == KEEPON_OK && o.tag == want[i], "kept outcome %d: rc %d tag %" PRIu64, i, rc, o.tag);
    }
    CHECK(o.sent && o.time == 600, "the outcome after the reply is intact");
    keepon_set_timeout(p.c, 50);
    struct keepon_msg m;
    memset(&m, 0, sizeof m);
    rc = keepon_recv(p.c, &m, NULL);
    CHECK(rc == KEEPON_ETIMEDOUT, "nothing left after the reply and three outcomes: %d kind %d", rc, m.kind);
    keepon_set_timeout(p.c, 5000);

    /* A truncated reply: KEEPON_EPROTO with the length, *t untouched, the outcome before it kept, the connection
     * usable. */
    peer_send(&p, b, outcome_bytes(b, KEEPON_SENT, 0, 21, 7, 700, 0));
    time_bytes(b, KEEPON_SYNC_FREE_RUNNING, KEEPON_PORT_NONE, KEEPON_SERVO_UNLOCKED, 0, v);
    peer_send(&p, b, 69);
    struct keepon_time before = t;
    rc = keepon_time(p.c, &t);
    CHECK(rc == KEEPON_EPROTO && strcmp(keepon_strerror(p.c, rc), "time reply of 69 bytes, expected 70") == 0,
          "truncated time reply: %d %s", rc, keepon_strerror(p.c, rc));
    CHECK(memcmp(&before, &t, sizeof t) == 0, "a failed keepon_time leaves *t alone");
    peer_expect_time_request(&p);
    rc = keepon_outcome(p.c, &o);
    CHECK(rc == KEEPON_OK && o.tag == 21, "outcome before a truncated reply kept: %d", rc);
    peer_send(&p, b, time_bytes(b, KEEPON_SYNC_FREE_RUNNING, KEEPON_PORT_NONE, KEEPON_SERVO_UNLOCKED, 0, v));
    rc = keepon_time(p.c, &t);
    CHECK(rc == KEEPON_OK && t.sync == KEEPON_SYNC_FREE_RUNNING && t.flags == 0 && t.offset == 0,
          "usable after a truncated reply: %s", keepon_strerror(p.c, rc));
    peer_expect_time_request(&p);

    /* A bad state byte names itself. */
    time_bytes(b, 1, 2, 2, 3, v);
    b[3] = 9;
    peer_send(&p, b, 70);
    rc = keepon_time(p.c, &t);
    CHECK(rc == KEEPON_EPROTO && strcmp(keepon_strerror(p.c, rc), "time reply: unknown port role 9") == 0,
          "bad port role: %s", keepon_strerror(p.c, rc));
    peer_expect_time_request(&p);

    /* The daemon's error reply is the error. */
    const uint8_t err[] = {1, 0x83, 'n', 'o'};
    peer_send(&p, err, sizeof err);
    rc = keepon_time(p.c, &t);
    CHECK(rc == KEEPON_EREQUEST && strcmp(keepon_strerror(p.c, rc), "no") == 0, "error reply: %d", rc);
    peer_expect_time_request(&p);

    /* A Time reply nobody waits for: keepon_outcome skips it, keepon_recv reports it. */
    peer_send(&p, b, time_bytes(b, 0, 0, 0, 0, v));
    peer_send(&p, b, outcome_bytes(b, KEEPON_SENT, 0, 31, 8, 800, 0));
    peer_send(&p, b, time_bytes(b, 2, 1, 1, 1, v));
    rc = keepon_outcome(p.c, &o);
    CHECK(rc == KEEPON_OK && o.tag == 31, "stale time reply skipped: %d", rc);
    rc = keepon_recv(p.c, &m, NULL);
    CHECK(rc == KEEPON_OK && m.kind == KEEPON_MSG_TIME && m.time.sync == KEEPON_SYNC_NOT_SYNCHRONISED &&
              m.time.port == KEEPON_PORT_MASTER && m.time.offset == -42,
          "keepon_recv: time message: %d kind %d", rc, m.kind);

    /* The connection ends inside the reply. */
    time_bytes(b, 0, 0, 0, 0, v);
    uint8_t cut[4 + 20] = {70, 0, 0, 0};
    memcpy(cut + 4, b, 20);
    CHECK(write(p.fd, cut, sizeof cut) == (ssize_t)sizeof cut, "peer write");
    shutdown(p.fd, SHUT_WR);
    rc = keepon_time(p.c, &t);
    CHECK(rc == KEEPON_EPROTO && strcmp(keepon_strerror(p.c, rc), "connection closed inside a message") == 0,
          "reply cut by the end of the connection: %d %s", rc, keepon_strerror(p.c, rc));
    peer_close(&p);
}

/* The Info of the Rust test `responses_round_trip`: 1 Gb/s, 1230-byte slots, ring 32, batch 8, now 5, cycle start
 * 6, base time 1 s, cycle 21504/10 ns, host flags FIFO | REFUSED; class "a" with windows (0, 10000) and
 * (40000, 20000), class "bb" best effort. 107 bytes: the 66 fixed, "a" (4 + 2 × 16 = 36, ending at 102), "bb" (5). */
#define INFO_FIXED_BYTES 66
static size_t info_bytes(uint8_t *b) {
    memset(b, 0, 107);
    b[0] = 1;
    b[1] = 0x81;
    put64(b + 2, 1000000000);
    b[10] = 0xce; /* 1230 */
    b[11] = 0x04;
    b[14] = 32;
    b[18] = 8;
    put64(b + 22, 5);
    put64(b + 30, 6);
    put64(b + 38, 1000000000);
    put64(b + 46, 21504);
    put64(b + 54, 10);
    b[62] = KEEPON_HOST_FIFO | KEEPON_HOST_REFUSED;
    memcpy(b + 66, "\x01" "a" "\x02\x00", 4);
    put64(b + 70, 0);
    put64(b + 78, 10000);
    put64(b + 86, 40000);
    put64(b + 94, 20000);
    memcpy(b + 102, "\x02" "bb" "\x00\x00", 5);
    return 107;
}

static void info_codec_checks(void) {
    struct keepon_msg m;
    static struct keepon_info info, before;
    uint8_t ib[128];
    size_t n = info_bytes(ib);
    unsigned count = 99;
    const struct keepon_window *w;
    CHECK(keepon_parse(ib, n, &m, &info) == KEEPON_OK && m.kind == KEEPON_MSG_INFO && m.raw_kind == 0x81 &&
              info.rate_bps == 1000000000 && info.slot_bytes == 1230 && info.ring == 32 && info.batch == 8 &&
              info.now == 5 && info.cycle_start == 6 && info.base_time == 1000000000 && info.cycle_num == 21504 &&
              info.cycle_den == 10 && info.host == (KEEPON_HOST_FIFO | KEEPON_HOST_REFUSED) && info.nclasses == 2 && strcmp(keepon_info_class(&info, 0), "a") == 0 &&
              strcmp(keepon_info_class(&info, 1), "bb") == 0 && keepon_info_class(&info, 2) == NULL,
          "info: %s", m.text);
    w = keepon_info_windows(&info, 0, &count);
    CHECK(w && count == 2 && w[0].offset == 0 && w[0].length == 10000 && w[1].offset == 40000 &&
              w[1].length == 20000,
          "windows of a: %u", count);
    w = keepon_info_windows(&info, 1, &count);
    CHECK(w && count == 0, "best effort bb has no windows: %u", count);
    count = 99;
    CHECK(keepon_info_windows(&info, 2, &count) == NULL && count == 0 && keepon_info_windows(&info, 9, NULL) == NULL,
          "no class 2");
    CHECK(keepon_parse(ib, n, &m, NULL) == KEEPON_OK && m.kind == KEEPON_MSG_INFO, "info without storage");

    /* Cut anywhere: valid only at a class boundary (66: no classes, 102: "a" alone); otherwise a protocol error
     * that leaves *info as it was. */
    for (size_t cut = 0; cut < n; cut++) {
        uint8_t *heap = malloc(cut ? cut : 1);
        memcpy(heap, ib, cut);
        memcpy(&before, &info, sizeof info);
        int rc = keepon_parse(heap, cut, &m, &info);
        if (cut == 66 || cut == 102)
            CHECK(rc == KEEPON_OK && info.nclasses == (unsigned)(cut == 102) && info.cycle_den == 10, "info cut to %zu", cut);
        else
            CHECK(rc == KEEPON_EPROTO && memcmp(&before, &info, sizeof info) == 0, "info cut to %zu: %d", cut, rc);
        free(heap);
        keepon_parse(ib, n, &m, &info);
    }
    /* The Rust test `garbage_is_an_error_not_a_panic`: one byte short of the windows it promises. */
    CHECK(keepon_parse(ib, 101, &m, &info) == KEEPON_EPROTO && strcmp(m.text, "info reply: class cut short") == 0,
          "windows cut short: %s", m.text);
    CHECK(keepon_parse(ib, 106, &m, &info) == KEEPON_EPROTO && strcmp(m.text, "info reply: class cut short") == 0,
          "window count cut short: %s", m.text);
    CHECK(keepon_parse(ib, 65, &m, &info) == KEEPON_EPROTO &&
              strcmp(m.text, "info reply of 65 bytes is shorter than 66") == 0,
          "info too short: %s", m.text);
    ib[68] = 0xff; /* "a" promises 0xff02 windows */
    CHECK(keepon_parse(ib, n, &m, &info) == KEEPON_EPROTO && strcmp(m.text, "info reply: class cut short") == 0,
          "a window count beyond the message: %s", m.text);
    ib[68] = 0;
    put64(ib + 54, 0);
    CHECK(keepon_parse(ib, n, &m, &info) == KEEPON_EPROTO && strcmp(m.text, "info reply: cycle denominator 0") == 0,
          "cycle denominator 0: %s", m.text);
    /* The former 38-byte fixed part with two classes is too short now. */
    uint8_t old[43] = {1, 0x81};
    memcpy(old + 38, "\x01" "a" "\x02" "bb", 5);
    CHECK(keepon_parse(old, sizeof old, &m, &info) == KEEPON_EPROTO, "the former info layout");

    /* The most windows a legal configuration has fit (in one reply); a longer (hand-made) body with more is
     * refused, not written past the store. */
    static uint8_t big[2 * KEEPON_MAX_REPLY];
    info_bytes(big);
    size_t at = INFO_FIXED_BYTES;
    for (int k = 0; k < 2; k++) {
        big[at] = 0;
        big[at + 1] = KEEPON_INFO_MAX_WINDOWS & 0xff;
        big[at + 2] = KEEPON_INFO_MAX_WINDOWS >> 8;
        for (int j = 0; j < KEEPON_INFO_MAX_WINDOWS; j++) {
            put64(big + at + 3 + 16 * j, (uint64_t)j * 100);
            put64(big + at + 11 + 16 * j, 100);
        }
        at += 3 + 16 * KEEPON_INFO_MAX_WINDOWS;
        if (k == 0) {
            CHECK(at <= KEEPON_MAX_REPLY, "one full class is %zu bytes", at);
            CHECK(keepon_parse(big, at, &m, &info) == KEEPON_OK && info.nclasses == 1 &&
                      keepon_info_windows(&info, 0, &count)[KEEPON_INFO_MAX_WINDOWS - 1].offset ==
                          (uint64_t)(KEEPON_INFO_MAX_WINDOWS - 1) * 100 &&
                      count == KEEPON_INFO_MAX_WINDOWS,
                  "%d windows: %s", KEEPON_INFO_MAX_WINDOWS, m.text);
        }
    }
    CHECK(keepon_parse(big, at, &m, &info) == KEEPON_EPROTO && strstr(m.text, "more classes or windows"),
          "windows beyond the store: %s", m.text);
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
    CHECK(strcmp(keepon_reason_name(KEEPON_R_SCHEDULE_CHANGE), "schedule-change") == 0 &&
              keepon_reason_name(KEEPON_R_COUNT) == NULL,
          "the newest reason has its name");
    CHECK(strcmp(keepon_reason_name(KEEPON_R_SHUTDOWN), "shutdown") == 0 &&
              strcmp(keepon_reason_name(KEEPON_R_NOT_OWNED), "not-owned") == 0,
          "reason names");
    outcome_bytes(b, 3, 0, 6, 0, 0, 0);
    CHECK(keepon_parse(b, 32, &m, NULL) == KEEPON_EPROTO && strstr(m.text, "frame 6: unknown status 3"),
          "unknown status: %s", m.text);
    outcome_bytes(b, 0, 0, 1, 2, 3, 4);
    CHECK(keepon_parse(b, 34, &m, NULL) == KEEPON_OK && m.outcome.tag == 1, "longer outcome accepted");
    CHECK(keepon_parse(b, 31, &m, NULL) == KEEPON_EPROTO, "short outcome refused");
    info_codec_checks();
    const uint8_t err[] = {1, 0x83, 'b', 'a', 'd'};
    CHECK(keepon_parse(err, sizeof err, &m, NULL) == KEEPON_OK && m.kind == KEEPON_MSG_ERROR &&
              strcmp(m.text, "bad") == 0,
          "error reply");
    const uint8_t newer[] = {1, 0x8F, 9};
    CHECK(keepon_parse(newer, sizeof newer, &m, NULL) == KEEPON_OK && m.kind == KEEPON_MSG_UNKNOWN &&
              m.raw_kind == 0x8F,
          "unknown kind");
    const uint8_t v2[] = {2, 0x82};
    CHECK(keepon_parse(v2, 2, &m, NULL) == KEEPON_EPROTO && keepon_parse(v2, 1, &m, NULL) == KEEPON_EPROTO,
          "version / header");
    /* Random bytes: only OK or EPROTO, never a read outside the buffer (the Makefile builds this test with
     * AddressSanitizer and UBSan where the compiler has them). */
    uint32_t x = 12345;
    for (int round = 0; round < 100000; round++) {
        uint8_t r[128];
        size_t len = (x = x * 1103515245u + 12345u) >> 16 & 127;
        for (size_t i = 0; i < len; i++) r[i] = (uint8_t)((x = x * 1103515245u + 12345u) >> 16);
        if (len >= 2 && (round & 1)) {
            r[0] = 1;
            r[1] = (uint8_t)(0x81 + round % 6);
        }
        uint8_t *heap = malloc(len ? len : 1);
        memcpy(heap, r, len);
        int rc = keepon_parse(heap, len, &m, &info);
        CHECK(rc == KEEPON_OK || rc == KEEPON_EPROTO, "parse returned %d", rc);
        free(heap);
    }
    /* A valid Info with windows, cut anywhere and a few bytes changed: the class and window walk stays inside. */
    uint8_t ib[128];
    size_t full = info_bytes(ib);
    for (int round = 0; round < 50000; round++) {
        uint8_t *heap = malloc(full);
        memcpy(heap, ib, full);
        size_t len = full - ((x = x * 1103515245u + 12345u) >> 16) % 48;
        for (int k = (int)((x >> 20) & 3); k > 0; k--) {
            x = x * 1103515245u + 12345u;
            heap[INFO_FIXED_BYTES + (x >> 16) % (full - INFO_FIXED_BYTES)] = (uint8_t)(x >> 8);
        }
        int rc = keepon_parse(heap, len, &m, (round & 1) ? &info : NULL);
        CHECK(rc == KEEPON_OK || rc == KEEPON_EPROTO, "parse returned %d", rc);
        if (rc == KEEPON_OK && (round & 1))
            for (unsigned i = 0; i < info.nclasses; i++) {
                unsigned count = 0;
                const struct keepon_window *w = keepon_info_windows(&info, i, &count);
                CHECK(w != NULL && count <= KEEPON_INFO_MAX_WINDOWS, "class %u windows", i);
                for (unsigned k = 0; k < count; k++) x ^= (uint32_t)w[k].offset ^ (uint32_t)w[k].length;
            }
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
    /* The schedule: a 3.2 ms cycle (32 slots of 100 µs) from the base time, cycle_start one of its starts; tc-0
     * owns ring slot 0, tc-1 slots 1 and 17, tc-2 is best effort. */
    unsigned nw[3] = {0, 0, 0};
    const struct keepon_window *w0 = keepon_info_windows(&info, 0, &nw[0]);
    const struct keepon_window *w1 = keepon_info_windows(&info, 1, &nw[1]);
    keepon_info_windows(&info, 2, &nw[2]);
    CHECK(info.cycle_den != 0 && info.cycle_num == (uint64_t)CYCLE * info.cycle_den &&
              (info.cycle_start - info.base_time) % CYCLE == 0,
          "cycle %" PRIu64 "/%" PRIu64 " ns, base %" PRId64 ", cycle start %" PRId64, info.cycle_num, info.cycle_den,
          info.base_time, info.cycle_start);
    CHECK(nw[0] == 1 && w0[0].offset == 0 && w0[0].length == (uint64_t)SLOT && nw[1] == 2 &&
              w1[0].offset == (uint64_t)SLOT && w1[0].length == (uint64_t)SLOT &&
              w1[1].offset == 17 * (uint64_t)SLOT && w1[1].length == (uint64_t)SLOT && nw[2] == 0,
          "windows: %u %u %u", nw[0], nw[1], nw[2]);

    uint8_t f[2000];
    /* 100 cycles (320 ms) ahead: a loaded host delaying the daemon past these slots would make them `late`. */
    int64_t first = info.cycle_start + 100 * CYCLE;
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

    /* Time: no [ptp] in the test configuration, so the EPHC runs free next to the host's CLOCK_TAI (the simulated
     * NIC is held to it). A submit the daemon rejects at once (unknown class) is answered before the Time
     * request that follows it: that outcome must still reach keepon_outcome. */
    frame(f, 100, 400);
    rc = keepon_submit(c, "tc-9", first, f, 100, 400);
    CHECK(rc == KEEPON_OK, "submit 400: %s", keepon_strerror(c, rc));
    struct timespec t0, t1;
    struct keepon_time t;
    clock_gettime(CLOCK_TAI, &t0);
    rc = keepon_time(c, &t);
    clock_gettime(CLOCK_TAI, &t1);
    CHECK(rc == KEEPON_OK, "time: %s", keepon_strerror(c, rc));
    if (rc == KEEPON_OK) {
        int64_t host0 = (int64_t)t0.tv_sec * 1000000000 + t0.tv_nsec;
        int64_t host1 = (int64_t)t1.tv_sec * 1000000000 + t1.tv_nsec;
        CHECK(t.sync == KEEPON_SYNC_FREE_RUNNING && t.port == KEEPON_PORT_NONE &&
                  !(t.flags & KEEPON_TIME_OFFSET_VALID) && !(t.flags & KEEPON_TIME_PATH_DELAY_VALID),
              "free running without [ptp]: sync %d (%s) port %d flags %u", t.sync, keepon_sync_name((unsigned)t.sync),
              t.port, t.flags);
        CHECK(llabs(t.ephc_now - t.host_now) < 10000000, "EPHC %" PRId64 " vs host %" PRId64, t.ephc_now,
              t.host_now);
        CHECK(t.host_now > host0 - 1000000000 && t.host_now < host1 + 1000000000,
              "host_now %" PRId64 " is this host's CLOCK_TAI [%" PRId64 ", %" PRId64 "]", t.host_now, host0, host1);
        CHECK(t.ephc_now > info.now, "EPHC %" PRId64 " after the earlier info's now %" PRId64, t.ephc_now, info.now);
        CHECK(!(t.flags & KEEPON_TIME_ALIGNMENT_VALID) ||
                  (0 <= t.align_p50 && t.align_p50 <= t.align_p99 && t.align_p99 <= t.align_max),
              "alignment %" PRId64 " %" PRId64 " %" PRId64, t.align_p50, t.align_p99, t.align_max);
    }
    struct keepon_outcome early;
    memset(&early, 0, sizeof early);
    rc = keepon_outcome(c, &early);
    CHECK(rc == KEEPON_OK && early.tag == 400 && !early.sent && early.reason == KEEPON_R_UNKNOWN_CLASS,
          "the outcome that came before the time reply: rc %d tag %" PRIu64, rc, early.tag);

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

/* Release times from the daemon (on the simulated NIC, which paces its own wire: not valid): after subscribing,
 * each sent frame's outcome is followed by exactly one release time with its tag, a rejected frame gets none. */
static void release_daemon_checks(const char *path) {
    keepon_client *c = keepon_connect(path);
    CHECK(c != NULL, "connect %s", path);
    if (!c) return;
    keepon_set_timeout(c, 10000);
    struct keepon_info info;
    unsigned now = 0;
    int rc = keepon_info(c, &info);
    if (rc == KEEPON_OK) rc = keepon_subscribe(c, KEEPON_SUBSCRIBE_RELEASE_TIMES, &now);
    CHECK(rc == KEEPON_OK && now == KEEPON_SUBSCRIBE_RELEASE_TIMES, "subscribe: %s", keepon_strerror(c, rc));
    if (rc != KEEPON_OK) {
        keepon_close(c);
        return;
    }
    uint8_t f[100];
    enum { N = 5 };
    int64_t first = info.cycle_start + 10 * CYCLE;
    for (int i = 0; i < N; i++) {
        frame(f, sizeof f, 500 + (uint64_t)i);
        CHECK(keepon_submit(c, "tc-0", first + i * CYCLE, f, sizeof f, 500 + (uint64_t)i) == KEEPON_OK, "submit");
    }
    frame(f, sizeof f, 510);
    CHECK(keepon_submit(c, "tc-0", first + 5 * SLOT, f, sizeof f, 510) == KEEPON_OK, "submit not owned");
    int outcome[N + 1] = {0}, sent[N + 1] = {0}, released[N + 1] = {0}, answered = 0, expected = N + 1;
    while (answered < expected) {
        struct keepon_msg m;
        rc = keepon_recv(c, &m, NULL);
        CHECK(rc == KEEPON_OK, "message %d: %s", answered, keepon_strerror(c, rc));
        if (rc != KEEPON_OK) break;
        if (m.kind == KEEPON_MSG_OUTCOME && m.outcome.tag >= 500 && m.outcome.tag <= 510) {
            unsigned i = m.outcome.tag == 510 ? N : (unsigned)(m.outcome.tag - 500);
            outcome[i]++;
            sent[i] = m.outcome.sent;
            answered++;
            expected += m.outcome.sent; /* and its release time */
        } else if (m.kind == KEEPON_MSG_RELEASED && m.released.tag >= 500 && m.released.tag < 500 + N) {
            unsigned i = (unsigned)(m.released.tag - 500);
            CHECK(outcome[i] == 1 && sent[i], "release time of frame %u before its sent outcome", i);
            CHECK(!m.released.valid && !m.released.stamped, "the simulated NIC paces its wire: no release time");
            released[i]++;
            answered++;
        } else {
            CHECK(0, "unexpected message kind %d", m.kind);
        }
    }
    for (int i = 0; i <= N; i++)
        CHECK(outcome[i] == 1 && released[i] == sent[i], "frame %d: %d outcomes, sent %d, %d release times", i,
              outcome[i], sent[i], released[i]);
    CHECK(!sent[N], "the frame in a slot tc-0 does not own is rejected");
    keepon_set_timeout(c, 200);
    struct keepon_msg extra;
    rc = keepon_recv(c, &extra, NULL);
    CHECK(rc == KEEPON_ETIMEDOUT, "nothing more: rc %d kind %d", rc, extra.kind);
    keepon_close(c);
}

int main(int argc, char **argv) {
    codec_checks();
    time_codec_checks();
    time_client_checks();
    release_codec_checks();
    subscribe_client_checks();
    if (argc > 1) {
        daemon_checks(argv[1]);
        release_daemon_checks(argv[1]);
    }
    if (failures) {
        fprintf(stderr, "%d checks failed\n", failures);
        return 1;
    }
    fprintf(stderr, "all checks passed\n");
    return 0;
}
