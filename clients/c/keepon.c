/*
 * keepon.c — C client of `keepon daemon` (reference: keepon.h).
 *
 * Two layers: a sans-I/O codec (keepon_encode_*, keepon_parse) that reads untrusted bytes with checked lengths,
 * and a blocking client that keeps one byte buffer of received, not yet consumed responses. keepon_info() and
 * keepon_time() take their reply out of the middle of that buffer, so outcomes that arrived before it stay, in
 * order, for keepon_outcome().
 */
#define _DEFAULT_SOURCE
#include "keepon.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

enum {
    K_INFO = 1,
    K_SUBMIT = 2,
    K_INFO_REPLY = 0x81,
    K_OUTCOME = 0x82,
    K_ERROR = 0x83,
    K_TIME = 3,
    K_TIME_REPLY = 0x84,
    K_SUBSCRIBE = 4,
    K_RELEASED = 0x85,
    K_SUBSCRIBED = 0x86,
    RELEASED_LEN = 4 + 8 + 8,
    SUBMIT_HEADER = 4 + 8 + 8,
    OUTCOME_LEN = 32,
    INFO_FIXED = 2 + 8 + 4 * 3 + 8 * 5 + 4,
    INFO_WINDOW = 8 + 8,
    TIME_REPLY_LEN = 6 + 8 * 8,
    /* Most bytes of unread responses kept (a daemon caps frames in flight, so this is never reached by a
     * client that reads its outcomes). */
    MAX_BUFFERED = 4 << 20
};

struct keepon_client {
    int fd;
    int timeout_ms;
    uint8_t *rbuf;
    size_t rlen, rcap;
    int saved_errno;
    char text[512];
};

/* ---- little-endian fields ---------------------------------------------------------------------------------- */

static uint64_t get_u64(const uint8_t *b) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | b[i];
    return v;
}

static uint32_t get_u32(const uint8_t *b) {
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static void put_u64(uint8_t *b, uint64_t v) {
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
}

static void put_u32(uint8_t *b, uint32_t v) {
    for (int i = 0; i < 4; i++) b[i] = (uint8_t)(v >> (8 * i));
}

/* ---- reasons ----------------------------------------------------------------------------------------------- */

static const char *const REASONS[KEEPON_R_COUNT] = {
    "late",      "too-far-ahead",  "slot-taken",  "not-owned", "oversize",   "runt",       "unknown-class",
    "missing-txtime", "unexpected-txtime", "queue-full", "no-capacity", "forbidden", "underrun", "link-fault",
    "shutdown", "clock-step", "not-synchronised", "schedule-change",
};

const char *keepon_reason_name(unsigned code) {
    return code < KEEPON_R_COUNT ? REASONS[code] : NULL;
}

const char *keepon_reason_str(unsigned code, char *buf, size_t len) {
    if (len == 0) return "";
    if (code < KEEPON_R_COUNT)
        snprintf(buf, len, "%s", REASONS[code]);
    else
        snprintf(buf, len, "unknown(%u)", code);
    return buf;
}

/* ---- codec ------------------------------------------------------------------------------------------------- */

long keepon_encode_submit(uint8_t *buf, size_t cap, const char *cls, int64_t txtime, const void *frame, size_t len,
                          uint64_t tag) {
    size_t cl = cls ? strlen(cls) : 0;
    if (cl > 255 || (len > 0 && frame == NULL)) return KEEPON_EINVAL;
    if (len > KEEPON_MAX_MESSAGE || SUBMIT_HEADER + cl + len > KEEPON_MAX_MESSAGE) return KEEPON_EINVAL;
    size_t body = SUBMIT_HEADER + cl + len;
    if (cap < 4 + body) return KEEPON_EINVAL;
    put_u32(buf, (uint32_t)body);
    uint8_t *m = buf + 4;
    m[0] = KEEPON_PROTOCOL_VERSION;
    m[1] = K_SUBMIT;
    m[2] = txtime != KEEPON_NO_TXTIME;
    m[3] = (uint8_t)cl;
    put_u64(m + 4, tag);
    put_u64(m + 12, txtime == KEEPON_NO_TXTIME ? 0 : (uint64_t)txtime);
    if (cl) memcpy(m + SUBMIT_HEADER, cls, cl);
    if (len) memcpy(m + SUBMIT_HEADER + cl, frame, len);
    return (long)(4 + body);
}

/* A request that is its 2-byte header alone (Info, Time). */
static long encode_bare(uint8_t *buf, size_t cap, uint8_t kind) {
    if (cap < 6) return KEEPON_EINVAL;
    put_u32(buf, 2);
    buf[4] = KEEPON_PROTOCOL_VERSION;
    buf[5] = kind;
    return 6;
}

long keepon_encode_info(uint8_t *buf, size_t cap) { return encode_bare(buf, cap, K_INFO); }

long keepon_encode_time(uint8_t *buf, size_t cap) { return encode_bare(buf, cap, K_TIME); }

long keepon_encode_subscribe(uint8_t *buf, size_t cap, unsigned flags) {
    if (cap < 7 || (flags & ~KEEPON_SUBSCRIBE_RELEASE_TIMES)) return KEEPON_EINVAL;
    put_u32(buf, 3);
    buf[4] = KEEPON_PROTOCOL_VERSION;
    buf[5] = K_SUBSCRIBE;
    buf[6] = (uint8_t)flags;
    return 7;
}

static const char *const SYNC_NAMES[] = {"free-running", "synchronised", "not-synchronised"};

const char *keepon_sync_name(unsigned sync) {
    return sync < sizeof SYNC_NAMES / sizeof SYNC_NAMES[0] ? SYNC_NAMES[sync] : NULL;
}

/* An Info reply: checked, and stored in *i unless i is NULL (keepon_parse checks first, then stores, so a
 * malformed reply leaves *info alone). */
static int parse_info(const uint8_t *b, size_t n, struct keepon_msg *msg, struct keepon_info *i) {
    if (n < INFO_FIXED) {
        snprintf(msg->text, sizeof msg->text, "info reply of %zu bytes is shorter than %d", n, INFO_FIXED);
        return KEEPON_EPROTO;
    }
    if (get_u64(b + 54) == 0) {
        snprintf(msg->text, sizeof msg->text, "info reply: cycle denominator 0");
        return KEEPON_EPROTO;
    }
    if (i) {
        memset(i, 0, offsetof(struct keepon_info, class_at));
        i->rate_bps = get_u64(b + 2);
        i->slot_bytes = get_u32(b + 10);
        i->ring = get_u32(b + 14);
        i->batch = get_u32(b + 18);
        i->now = (int64_t)get_u64(b + 22);
        i->cycle_start = (int64_t)get_u64(b + 30);
        i->base_time = (int64_t)get_u64(b + 38);
        i->cycle_num = get_u64(b + 46);
        i->cycle_den = get_u64(b + 54);
        i->host = get_u32(b + 62);
    }
    size_t at = INFO_FIXED, out = 0, nw = 0;
    unsigned nclasses = 0;
    while (at < n) {
        size_t len = b[at];
        /* name_len | name | windows u16 | windows × 16 bytes, all inside the message */
        if (n - at < 1 + len + 2) {
            snprintf(msg->text, sizeof msg->text, "info reply: class cut short");
            return KEEPON_EPROTO;
        }
        size_t count = (size_t)b[at + 1 + len] | (size_t)b[at + 2 + len] << 8;
        if (n - at - 3 - len < count * INFO_WINDOW) {
            snprintf(msg->text, sizeof msg->text, "info reply: class cut short");
            return KEEPON_EPROTO;
        }
        if (nclasses >= 256 || out + len + 1 > sizeof ((struct keepon_info *)0)->names ||
            nw + count > KEEPON_INFO_MAX_WINDOWS) {
            snprintf(msg->text, sizeof msg->text, "info reply: more classes or windows than a message holds");
            return KEEPON_EPROTO;
        }
        if (i) {
            i->class_at[nclasses] = (uint16_t)out;
            memcpy(i->names + out, b + at + 1, len);
            i->names[out + len] = '\0';
            i->window_at[nclasses] = (uint16_t)nw;
            i->window_count[nclasses] = (uint16_t)count;
            for (size_t w = 0; w < count; w++) {
                i->windows[nw + w].offset = get_u64(b + at + 3 + len + INFO_WINDOW * w);
                i->windows[nw + w].length = get_u64(b + at + 3 + len + INFO_WINDOW * w + 8);
            }
        }
        nclasses++;
        out += len + 1;
        nw += count;
        at += 3 + len + count * INFO_WINDOW;
    }
    if (i) i->nclasses = nclasses;
    return KEEPON_OK;
}

int keepon_parse(const uint8_t *b, size_t n, struct keepon_msg *msg, struct keepon_info *info) {
    memset(msg, 0, sizeof *msg);
    if (n < 2 || b[0] != KEEPON_PROTOCOL_VERSION) return KEEPON_EPROTO;
    msg->raw_kind = b[1];
    switch (b[1]) {
    case K_OUTCOME: {
        /* Longer outcomes (fields appended by a newer daemon) are accepted; their tail is ignored. */
        if (n < OUTCOME_LEN) return KEEPON_EPROTO;
        struct keepon_outcome *o = &msg->outcome;
        o->tag = get_u64(b + 4);
        o->status = b[2];
        switch (b[2]) {
        case KEEPON_SENT:
        case KEEPON_SENT_OFF_SCHEDULE:
            o->sent = 1;
            o->off_schedule = b[2] == KEEPON_SENT_OFF_SCHEDULE;
            o->slot = get_u64(b + 12);
            o->time = (int64_t)get_u64(b + 20);
            o->ring_slot = get_u32(b + 28);
            break;
        case KEEPON_REJECTED:
            o->reason = b[3];
            break;
        default:
            snprintf(msg->text, sizeof msg->text, "outcome of frame %llu: unknown status %u",
                     (unsigned long long)o->tag, b[2]);
            return KEEPON_EPROTO;
        }
        msg->kind = KEEPON_MSG_OUTCOME;
        return KEEPON_OK;
    }
    case K_INFO_REPLY: {
        int r = parse_info(b, n, msg, NULL);
        if (r == KEEPON_OK && info) r = parse_info(b, n, msg, info);
        if (r == KEEPON_OK) msg->kind = KEEPON_MSG_INFO;
        return r;
    }
    case K_TIME_REPLY: {
        /* Exactly this length, like the Rust and Python clients: the reply has no variable part. */
        if (n != TIME_REPLY_LEN) {
            snprintf(msg->text, sizeof msg->text, "time reply of %zu bytes, expected %d", n, TIME_REPLY_LEN);
            return KEEPON_EPROTO;
        }
        static const char *const what[3] = {"sync state", "port role", "servo state"};
        for (int k = 0; k < 3; k++)
            if (b[2 + k] > 2) {
                snprintf(msg->text, sizeof msg->text, "time reply: unknown %s %u", what[k], b[2 + k]);
                return KEEPON_EPROTO;
            }
        if (b[5] & ~(KEEPON_TIME_OFFSET_VALID | KEEPON_TIME_PATH_DELAY_VALID | KEEPON_TIME_ALIGNMENT_VALID)) {
            snprintf(msg->text, sizeof msg->text, "time reply flags 0x%02x has unknown bits", b[5]);
            return KEEPON_EPROTO;
        }
        struct keepon_time *t = &msg->time;
        t->sync = b[2];
        t->port = b[3];
        t->servo = b[4];
        t->flags = b[5];
        t->ephc_now = (int64_t)get_u64(b + 6);
        t->host_now = (int64_t)get_u64(b + 14);
        t->offset = t->flags & KEEPON_TIME_OFFSET_VALID ? (int64_t)get_u64(b + 22) : 0;
        t->freq_ppt = (int64_t)get_u64(b + 30);
        t->path_delay = t->flags & KEEPON_TIME_PATH_DELAY_VALID ? (int64_t)get_u64(b + 38) : 0;
        if (t->flags & KEEPON_TIME_ALIGNMENT_VALID) {
            t->align_p50 = (int64_t)get_u64(b + 46);
            t->align_p99 = (int64_t)get_u64(b + 54);
            t->align_max = (int64_t)get_u64(b + 62);
        }
        msg->kind = KEEPON_MSG_TIME;
        return KEEPON_OK;
    }
    case K_RELEASED: {
        /* Exactly this length, like the Rust and Python clients. */
        if (n != RELEASED_LEN) {
            snprintf(msg->text, sizeof msg->text, "released of %zu bytes, expected %d", n, RELEASED_LEN);
            return KEEPON_EPROTO;
        }
        if (b[2] & ~3u) {
            snprintf(msg->text, sizeof msg->text, "released flags 0x%02x has unknown bits", b[2]);
            return KEEPON_EPROTO;
        }
        struct keepon_released *r = &msg->released;
        r->tag = get_u64(b + 4);
        r->valid = b[2] & 1;
        r->stamped = (b[2] & 2) != 0;
        r->time = r->valid ? (int64_t)get_u64(b + 12) : 0;
        msg->kind = KEEPON_MSG_RELEASED;
        return KEEPON_OK;
    }
    case K_SUBSCRIBED:
        if (n != 3 || (b[2] & ~KEEPON_SUBSCRIBE_RELEASE_TIMES)) {
            snprintf(msg->text, sizeof msg->text, "malformed subscribed reply");
            return KEEPON_EPROTO;
        }
        msg->subscribed = b[2];
        msg->kind = KEEPON_MSG_SUBSCRIBED;
        return KEEPON_OK;
    case K_ERROR: {
        size_t len = n - 2 < sizeof msg->text - 1 ? n - 2 : sizeof msg->text - 1;
        memcpy(msg->text, b + 2, len);
        msg->text[len] = '\0';
        msg->kind = KEEPON_MSG_ERROR;
        return KEEPON_OK;
    }
    default:
        msg->kind = KEEPON_MSG_UNKNOWN;
        return KEEPON_OK;
    }
}

const char *keepon_info_class(const struct keepon_info *info, unsigned i) {
    return i < info->nclasses ? info->names + info->class_at[i] : NULL;
}

const struct keepon_window *keepon_info_windows(const struct keepon_info *info, unsigned i, unsigned *count) {
    if (i >= info->nclasses) {
        if (count) *count = 0;
        return NULL;
    }
    if (count) *count = info->window_count[i];
    return info->windows + info->window_at[i];
}

/* ---- connection -------------------------------------------------------------------------------------------- */

static int sys_fail(keepon_client *c) {
    c->saved_errno = errno;
    return KEEPON_ESYS;
}

static int proto_fail(keepon_client *c, const char *what) {
    snprintf(c->text, sizeof c->text, "%s", what);
    return KEEPON_EPROTO;
}

keepon_client *keepon_connect(const char *socket_path) {
    struct sockaddr_un a;
    if (strlen(socket_path) >= sizeof a.sun_path) {
        errno = ENAMETOOLONG;
        return NULL;
    }
    keepon_client *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->timeout_ms = -1;
    c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0) {
        free(c);
        return NULL;
    }
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    memcpy(a.sun_path, socket_path, strlen(socket_path) + 1);
    if (connect(c->fd, (struct sockaddr *)&a, sizeof a) != 0) {
        int e = errno;
        close(c->fd);
        free(c);
        errno = e;
        return NULL;
    }
    return c;
}

void keepon_close(keepon_client *c) {
    if (!c) return;
    close(c->fd);
    free(c->rbuf);
    free(c);
}

int keepon_fd(const keepon_client *c) { return c->fd; }

int keepon_set_timeout(keepon_client *c, int timeout_ms) {
    if (timeout_ms < -1) return KEEPON_EINVAL;
    c->timeout_ms = timeout_ms;
    return KEEPON_OK;
}

int keepon_close_write(keepon_client *c) {
    return shutdown(c->fd, SHUT_WR) == 0 ? KEEPON_OK : sys_fail(c);
}

static int write_all(keepon_client *c, const uint8_t *b, size_t n) {
    while (n > 0) {
        ssize_t w = send(c->fd, b, n, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR) continue;
            if (errno == EPIPE || errno == ECONNRESET) return KEEPON_ECLOSED;
            return sys_fail(c);
        }
        b += w;
        n -= (size_t)w;
    }
    return KEEPON_OK;
}

int keepon_send_raw(keepon_client *c, const void *bytes, size_t len) { return write_all(c, bytes, len); }

int keepon_submit(keepon_client *c, const char *cls, int64_t txtime, const void *frame, size_t len, uint64_t tag) {
    uint8_t buf[4 + KEEPON_MAX_MESSAGE];
    long n = keepon_encode_submit(buf, sizeof buf, cls, txtime, frame, len, tag);
    if (n < 0) {
        snprintf(c->text, sizeof c->text, "frame %llu: class name over 255 bytes or message over %d bytes",
                 (unsigned long long)tag, KEEPON_MAX_MESSAGE);
        return (int)n;
    }
    return write_all(c, buf, (size_t)n);
}

/* Read more bytes into the buffer, waiting at most the timeout. */
static int fill(keepon_client *c) {
    if (c->rlen + 65536 > c->rcap) {
        if (c->rlen + 65536 > MAX_BUFFERED) return KEEPON_ENOMEM;
        size_t cap = c->rcap ? c->rcap * 2 : 65536 * 2;
        uint8_t *nb = realloc(c->rbuf, cap);
        if (!nb) return KEEPON_ENOMEM;
        c->rbuf = nb;
        c->rcap = cap;
    }
    for (;;) {
        struct pollfd p = {.fd = c->fd, .events = POLLIN};
        int r = poll(&p, 1, c->timeout_ms);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return sys_fail(c);
        if (r == 0) return KEEPON_ETIMEDOUT;
        ssize_t n = recv(c->fd, c->rbuf + c->rlen, c->rcap - c->rlen, 0);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n < 0 && errno == ECONNRESET) return KEEPON_ECLOSED;
        if (n < 0) return sys_fail(c);
        if (n == 0) return c->rlen ? proto_fail(c, "connection closed inside a message") : KEEPON_ECLOSED;
        c->rlen += (size_t)n;
        return KEEPON_OK;
    }
}

/* The complete message starting at `at`: 1 and its body length, 0 if incomplete, or KEEPON_EPROTO. */
static int complete_at(keepon_client *c, size_t at, size_t *len) {
    if (c->rlen - at < 4) return 0;
    uint32_t n = get_u32(c->rbuf + at);
    if (n > KEEPON_MAX_REPLY) return proto_fail(c, "message length beyond the protocol's maximum");
    if (c->rlen - at - 4 < n) return 0;
    *len = n;
    return 1;
}

/* Remove the message (prefix and body) at `at`. */
static void consume(keepon_client *c, size_t at, size_t len) {
    memmove(c->rbuf + at, c->rbuf + at + 4 + len, c->rlen - at - 4 - len);
    c->rlen -= 4 + len;
}

int keepon_recv(keepon_client *c, struct keepon_msg *msg, struct keepon_info *info_out) {
    size_t len = 0;
    int r;
    while ((r = complete_at(c, 0, &len)) == 0)
        if ((r = fill(c)) != KEEPON_OK) return r;
    if (r < 0) return r;
    r = keepon_parse(c->rbuf + 4, len, msg, info_out);
    consume(c, 0, len);
    if (r != KEEPON_OK) return proto_fail(c, msg->text[0] ? msg->text : "malformed response");
    return KEEPON_OK;
}

int keepon_outcome(keepon_client *c, struct keepon_outcome *out) {
    struct keepon_msg m;
    for (;;) {
        int r = keepon_recv(c, &m, NULL);
        if (r != KEEPON_OK) return r;
        if (m.kind == KEEPON_MSG_OUTCOME) {
            *out = m.outcome;
            return KEEPON_OK;
        }
        if (m.kind == KEEPON_MSG_ERROR) {
            snprintf(c->text, sizeof c->text, "%s", m.text);
            return KEEPON_EREQUEST;
        }
        /* an Info, Time or Subscribed reply nobody waits for, a release time, or a newer kind: skip */
    }
}

/* Send the request `req` (`n` bytes) and wait for its reply of kind `reply` (or an Error: KEEPON_EREQUEST). The
 * reply is parsed into *m (and *info) and taken out of the buffer; every other message before it (outcomes,
 * newer kinds) stays where it is, in order, for keepon_outcome()/keepon_recv(). */
static int ask(keepon_client *c, const uint8_t *req, size_t n, uint8_t reply, const char *what, struct keepon_msg *m,
               struct keepon_info *info) {
    int r = write_all(c, req, n);
    if (r != KEEPON_OK) return r;
    size_t at = 0;
    for (;;) {
        size_t len = 0;
        r = complete_at(c, at, &len);
        if (r < 0) return r;
        if (r == 0) {
            if ((r = fill(c)) != KEEPON_OK) return r;
            continue;
        }
        const uint8_t *b = c->rbuf + at + 4;
        if (len >= 2 && b[0] == KEEPON_PROTOCOL_VERSION && (b[1] == reply || b[1] == K_ERROR)) {
            r = keepon_parse(b, len, m, info);
            consume(c, at, len);
            if (r != KEEPON_OK) return proto_fail(c, m->text[0] ? m->text : what);
            if (m->kind == KEEPON_MSG_ERROR) {
                snprintf(c->text, sizeof c->text, "%s", m->text);
                return KEEPON_EREQUEST;
            }
            return KEEPON_OK;
        }
        at += 4 + len; /* an outcome (or another message): leave it for keepon_outcome */
    }
}

int keepon_info(keepon_client *c, struct keepon_info *info) {
    uint8_t req[6];
    struct keepon_msg m;
    keepon_encode_info(req, sizeof req);
    return ask(c, req, sizeof req, K_INFO_REPLY, "malformed info reply", &m, info);
}

int keepon_time(keepon_client *c, struct keepon_time *t) {
    uint8_t req[6];
    struct keepon_msg m;
    keepon_encode_time(req, sizeof req);
    int r = ask(c, req, sizeof req, K_TIME_REPLY, "malformed time reply", &m, NULL);
    if (r == KEEPON_OK) *t = m.time;
    return r;
}

int keepon_subscribe(keepon_client *c, unsigned flags, unsigned *now_flags) {
    uint8_t req[7];
    struct keepon_msg m;
    if (keepon_encode_subscribe(req, sizeof req, flags) < 0) {
        snprintf(c->text, sizeof c->text, "subscribe flags 0x%x has unknown bits", flags);
        return KEEPON_EINVAL;
    }
    int r = ask(c, req, sizeof req, K_SUBSCRIBED, "malformed subscribed reply", &m, NULL);
    if (r == KEEPON_OK && now_flags) *now_flags = m.subscribed;
    return r;
}

const char *keepon_strerror(const keepon_client *c, int rc) {
    switch (rc) {
    case KEEPON_OK: return "ok";
    case KEEPON_ESYS: return strerror(c ? c->saved_errno : errno);
    case KEEPON_EPROTO: return c && c->text[0] ? c->text : "invalid message from the daemon";
    case KEEPON_EREQUEST: return c && c->text[0] ? c->text : "the daemon refused a request";
    case KEEPON_ECLOSED: return "the daemon closed the connection";
    case KEEPON_EINVAL: return c && c->text[0] ? c->text : "argument the protocol cannot carry";
    case KEEPON_ETIMEDOUT: return "no response within the timeout";
    case KEEPON_ENOMEM: return "out of memory (or too many unread responses)";
    default: return "unknown keepon error";
    }
}
