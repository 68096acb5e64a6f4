/*
 * keepon.h — C client of `keepon daemon`
 *
 * NAME
 *     keepon_connect, keepon_info, keepon_time, keepon_subscribe, keepon_submit, keepon_outcome, keepon_recv,
 *     keepon_close_write, keepon_close — send Ethernet frames at a time through keepon and read each frame's
 *     outcome
 *
 * SYNOPSIS
 *     #include "keepon.h"          link with keepon.c (or -lkeepon: target/c/libkeepon.{a,so} after `make c-client`)
 *
 *     keepon_client *keepon_connect(const char *socket_path);
 *     int  keepon_set_timeout(keepon_client *c, int timeout_ms);
 *     int  keepon_info(keepon_client *c, struct keepon_info *info);
 *     int  keepon_time(keepon_client *c, struct keepon_time *t);
 *     int  keepon_subscribe(keepon_client *c, unsigned flags, unsigned *now_flags);
 *     int  keepon_submit(keepon_client *c, const char *cls, int64_t txtime, const void *frame, size_t len,
 *                        uint64_t tag);
 *     int  keepon_outcome(keepon_client *c, struct keepon_outcome *out);
 *     int  keepon_recv(keepon_client *c, struct keepon_msg *msg, struct keepon_info *info_out);
 *     int  keepon_send_raw(keepon_client *c, const void *bytes, size_t len);
 *     int  keepon_close_write(keepon_client *c);
 *     void keepon_close(keepon_client *c);
 *     int  keepon_fd(const keepon_client *c);
 *     const char *keepon_strerror(const keepon_client *c, int rc);
 *     const char *keepon_reason_name(unsigned code);
 *     const char *keepon_reason_str(unsigned code, char *buf, size_t len);
 *     const char *keepon_info_class(const struct keepon_info *info, unsigned i);
 *     const struct keepon_window *keepon_info_windows(const struct keepon_info *info, unsigned i, unsigned *count);
 *     const char *keepon_sync_name(unsigned sync);
 *
 * DESCRIPTION
 *     keepon sends each frame in the slot of its transmission time (txtime, TAI nanoseconds) and reports exactly
 *     one outcome per frame: sent (EPHC slot number, wire time, ownership ring slot) or rejected with a reason.
 *     This is the client side of the daemon's byte protocol (documented in crates/keepon/src/api/mod.rs): length-
 *     prefixed little-endian messages over a UNIX stream socket. Blocking I/O, no threads, no global state; one
 *     keepon_client must not be used by two threads at once.
 *
 *     keepon_connect() opens a connection to the daemon's socket (the `daemon.socket` of its configuration).
 *     Which classes the connection may use is decided by the daemon from the process's uid/gid.
 *
 *     keepon_set_timeout() bounds every wait for a response to timeout_ms milliseconds (-1: wait forever, the
 *     default). A wait that runs out returns KEEPON_ETIMEDOUT; the connection stays usable.
 *
 *     keepon_info() asks for the link's description: line rate, slot size, ring size, batch, the daemon's clock
 *     `now`, `cycle_start` (the start of a slot whose ring slot is 0, at least a ring ahead of the NIC: schedule
 *     from there), the schedule on network time the way an IEEE 802.1Qbv gate control list gives it, and the
 *     class names by index (keepon_info_class()). Cycle n starts at `base_time` + n·cycle, where the cycle time is
 *     `cycle_num`/`cycle_den` ns exactly (`ring` slots); keepon_info_windows(info, i, &count) returns class i's
 *     windows in the cycle (struct keepon_window: offset and length in whole ns) and stores how many in *count:
 *     a txtime base_time + n·cycle + offset + x, 0 <= x < length, is in the class's window. A best-effort class
 *     has none (count 0); an index beyond `nclasses` gives NULL and count 0. The schedule does not move,
 *     whatever synchronisation or underruns do: compute txtimes once from it. Outcomes that arrive before the
 *     reply are kept for keepon_outcome()/keepon_recv().
 *
 *     keepon_time() reads the station's network time, like clock_gettime() on a PHC: `ephc_now`, the EPHC (the
 *     clock frames are scheduled on, TAI ns), and `host_now`, the daemon host's CLOCK_TAI at the same instant;
 *     `sync` (KEEPON_SYNC_*: free running without `[ptp]`, synchronised, or not synchronised — then scheduled
 *     submits are rejected KEEPON_R_NOT_SYNCHRONISED), the PTP port's role (KEEPON_PORT_*), the servo's state
 *     (KEEPON_SERVO_*), its last offset estimate EPHC − master (ns, valid with KEEPON_TIME_OFFSET_VALID in
 *     `flags`), its frequency adjustment (parts per trillion) and mean path delay (ns, valid with
 *     KEEPON_TIME_PATH_DELAY_VALID), and how far the wire kept to the schedule: |wire slot start − schedule
 *     time| on the EPHC (ns) of the slots posted while the grid was locked, median, 99th percentile and maximum
 *     (`align_p50`, `align_p99`, `align_max`, valid with KEEPON_TIME_ALIGNMENT_VALID). Outcomes that arrive
 *     before the reply are kept, as for keepon_info().
 *     keepon_sync_name() gives "free-running", "synchronised" or "not-synchronised" (NULL for another value).
 *
 *     keepon_subscribe() chooses what the daemon reports beyond outcomes, for this connection. With
 *     KEEPON_SUBSCRIBE_RELEASE_TIMES (like SOF_TIMESTAMPING_TX_SOFTWARE next to the ETF error queue), the outcome
 *     of every frame that is sent is followed by exactly one release time (a keepon_msg of kind
 *     KEEPON_MSG_RELEASED, read with keepon_recv(); keepon_outcome() skips them): struct keepon_released gives the
 *     frame's tag and, when `valid`, `time`, when the host handed the frame to the kernel (TAI ns on keepon's
 *     clock) — on a host-paced link a frame leaves then, after its slot time; `stamped` says it is the kernel's
 *     software TX timestamp (else an estimate within the call that handed it over). Not `valid` where the NIC
 *     paces the link (the simulated NIC, line-rate NICs: the slot time is the wire time) or when no report came
 *     within a second. Rejected frames get none. flags 0 turns it off. *now_flags (if not NULL) gets what the
 *     daemon now does. A daemon that predates it answers with an error (KEEPON_EREQUEST).
 *
 *     keepon_submit() sends one frame: L2 bytes without FCS, class name `cls`, `txtime` in TAI ns or
 *     KEEPON_NO_TXTIME for a best-effort class, and a caller-chosen `tag` echoed in the outcome. It does not wait
 *     for the outcome. The daemon judges the frame (class, slot ownership, size, lateness, ...); the client only
 *     refuses what the protocol cannot carry (KEEPON_EINVAL: a class name over 255 bytes, a message over
 *     KEEPON_MAX_MESSAGE bytes).
 *
 *     keepon_outcome() waits for the next outcome. Outcomes can arrive in any order: match them by tag. Info, Time
 *     and Subscribe replies nobody waits for, release times and messages of a newer protocol are skipped. If the daemon reports a
 *     malformed request instead, it returns KEEPON_EREQUEST and keepon_strerror() gives the daemon's text.
 *
 *     keepon_recv() waits for the next message of any kind (outcome, info, time, release time, error text, or a
 *     kind this client does not know: msg->kind says which) without interpreting it; an Info reply is stored in
 *     *info_out when that is not NULL, a Time reply in msg->time, a release time in msg->released.
 *     keepon_send_raw() sends bytes as they are (for testing a daemon's handling of bad requests).
 *
 *     keepon_close_write() half-closes the connection: the daemon reads no more requests from it but still sends
 *     the outcome of every frame already submitted, then closes the connection (keepon_recv then reports the end).
 *     keepon_close() closes the connection and frees the client.
 *
 *     keepon_reason_name() gives the stable name of a reason code ("late", "not-owned", ...), or NULL for a code
 *     this client does not know; keepon_reason_str() writes the name, or "unknown(n)" for such a code, into buf.
 *
 * OUTCOMES
 *     struct keepon_outcome: `status` is KEEPON_SENT, KEEPON_REJECTED or KEEPON_SENT_OFF_SCHEDULE (sent, but off
 *     its schedule slot beyond the configured tolerance, after an underrun; `sent` is 1 for both sent statuses
 *     and `off_schedule` tells them apart). For sent frames `slot`, `time` and `ring_slot` say where and when;
 *     for rejected frames `reason` is a KEEPON_R_* code — possibly one newer than this header, which is not an
 *     error (keepon_reason_str() prints it as "unknown(n)").
 *
 * RETURN VALUE
 *     keepon_connect() returns a client, or NULL with errno set. The other int functions return KEEPON_OK (0) or
 *     a negative KEEPON_E* code; keepon_strerror() describes it (KEEPON_ESYS: errno's text at the time). Bytes
 *     from the daemon that are not a valid message give KEEPON_EPROTO; a stream whose framing is broken cannot be
 *     resynchronised, so close the client then. A Time reply must be exactly 70 bytes with known state bytes and
 *     flag bits, and an Info reply's classes must fill it exactly with a nonzero cycle denominator (as the Rust
 *     and Python clients require); otherwise keepon_time() or keepon_info() returns KEEPON_EPROTO and
 *     keepon_strerror() says what was wrong (the reply is dropped, the connection stays usable). keepon_recv()
 *     and keepon_outcome() return KEEPON_ECLOSED when the daemon has closed the connection.
 *
 * EXAMPLE
 *     keepon_client *c = keepon_connect("/run/keepon.sock");
 *     struct keepon_info info;
 *     struct keepon_outcome o;
 *     if (!c || keepon_info(c, &info) != KEEPON_OK) exit(1);
 *     keepon_submit(c, "tc-0", info.cycle_start, frame, frame_len, 1);
 *     if (keepon_outcome(c, &o) == KEEPON_OK && o.sent)
 *         printf("frame %llu left at %lld ns\n", (unsigned long long)o.tag, (long long)o.time);
 *     keepon_close(c);
 *     A complete program is clients/c/example.c.
 */
#ifndef KEEPON_H
#define KEEPON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Protocol version this client speaks. */
#define KEEPON_PROTOCOL_VERSION 1
/** Largest message the daemon accepts (a longer length prefix ends the connection). */
#define KEEPON_MAX_MESSAGE 16384
/** Largest reply the daemon sends (the largest Info of a legal configuration fits by construction). */
#define KEEPON_MAX_REPLY 98304
/** `txtime` of a best-effort frame. */
#define KEEPON_NO_TXTIME INT64_MIN

/** Return codes. */
enum keepon_rc {
    KEEPON_OK = 0,
    KEEPON_ESYS = -1,      /**< a system call failed: see errno */
    KEEPON_EPROTO = -2,    /**< bytes from the daemon that are not a valid message */
    KEEPON_EREQUEST = -3,  /**< the daemon answered a request with an error (text: keepon_strerror) */
    KEEPON_ECLOSED = -4,   /**< the daemon closed the connection */
    KEEPON_EINVAL = -5,    /**< an argument the protocol cannot carry */
    KEEPON_ETIMEDOUT = -6, /**< no response within the timeout */
    KEEPON_ENOMEM = -7     /**< out of memory, or too many unread responses buffered */
};

/** Outcome status byte. */
enum keepon_status {
    KEEPON_SENT = 0,
    KEEPON_REJECTED = 1,
    KEEPON_SENT_OFF_SCHEDULE = 2
};

/** Reason codes: the order of `keepon_core::outcome::Reason::ALL`. */
enum keepon_reason {
    KEEPON_R_LATE = 0,              /**< its slot was already posted (or lies in the past) */
    KEEPON_R_TOO_FAR_AHEAD = 1,     /**< txtime beyond the daemon's max_advance */
    KEEPON_R_SLOT_TAKEN = 2,        /**< its slot holds another frame (strict) / no owned slot free (relaxed) */
    KEEPON_R_NOT_OWNED = 3,         /**< its slot belongs to another class */
    KEEPON_R_OVERSIZE = 4,          /**< longer than a slot */
    KEEPON_R_RUNT = 5,              /**< shorter than an Ethernet header */
    KEEPON_R_UNKNOWN_CLASS = 6,     /**< no such class */
    KEEPON_R_MISSING_TXTIME = 7,    /**< a real-time class frame without txtime */
    KEEPON_R_UNEXPECTED_TXTIME = 8, /**< a best-effort class frame with a txtime */
    KEEPON_R_QUEUE_FULL = 9,        /**< pre-buffer full, or too many frames in flight on this connection */
    KEEPON_R_NO_CAPACITY = 10,      /**< the class can never be served */
    KEEPON_R_FORBIDDEN = 11,        /**< this uid/gid may not use the class */
    KEEPON_R_UNDERRUN = 12,         /**< an underrun moved the grid and its new slot had passed or was taken */
    KEEPON_R_LINK_FAULT = 13,       /**< the NIC or kernel refused the frame */
    KEEPON_R_SHUTDOWN = 14,         /**< the daemon stopped before the frame's slot */
    KEEPON_R_CLOCK_STEP = 15,       /**< a clock adjustment (PTP) moved its slot: passed, taken or not its class's */
    KEEPON_R_NOT_SYNCHRONISED = 16, /**< network time asked for (PTP configured) but the station is not synchronised */
    KEEPON_R_SCHEDULE_CHANGE = 17,  /**< a schedule change left the frame's slot without its class */
    KEEPON_R_COUNT = 18             /**< number of reasons this client knows */
};

/** One window of a class in the cycle (keepon_info_windows). */
struct keepon_window {
    uint64_t offset; /**< ns after the cycle start */
    uint64_t length; /**< ns */
};

/** Windows a struct keepon_info holds, all classes together: as many as a legal configuration has (one per ring
 * slot at most; the byte clock's windows are held to as many). */
#define KEEPON_INFO_MAX_WINDOWS 4096

/** The link as the daemon describes it. Times are TAI ns. */
/* keepon_info.host: the daemon's poll loop runs SCHED_FIFO; its memory is locked; the poll loop is pinned to a
 * CPU; the host refused something the daemon's [realtime] section asked for (its status line says what). */
#define KEEPON_HOST_FIFO 1u
#define KEEPON_HOST_MEMORY_LOCKED 2u
#define KEEPON_HOST_PINNED 4u
#define KEEPON_HOST_REFUSED 8u

struct keepon_info {
    uint64_t rate_bps;
    uint32_t slot_bytes;
    uint32_t ring;
    uint32_t batch;
    int64_t now;         /**< the daemon's clock when it answered */
    int64_t cycle_start; /**< start of a slot whose ring slot is 0 */
    int64_t base_time;   /**< a cycle starts here (and every cycle before and after) */
    uint64_t cycle_num;  /**< the cycle time is cycle_num / cycle_den ns exactly */
    uint64_t cycle_den;  /**< never 0 */
    uint32_t host;       /**< what the host granted the daemon: KEEPON_HOST_* flags */
    unsigned nclasses;
    uint16_t class_at[256];            /**< private: offsets into names (use keepon_info_class) */
    uint16_t window_at[256];           /**< private: class i's first window in windows (use keepon_info_windows) */
    uint16_t window_count[256];        /**< private: class i's number of windows */
    struct keepon_window windows[KEEPON_INFO_MAX_WINDOWS]; /**< private: the windows, class by class */
    char names[64 * 256];              /**< private: NUL-terminated class names (64 classes of ≤ 255 bytes) */
};

/** The single outcome of one submitted frame. */
struct keepon_outcome {
    uint64_t tag;
    int status;        /**< enum keepon_status */
    int sent;          /**< 1 for KEEPON_SENT and KEEPON_SENT_OFF_SCHEDULE */
    int off_schedule;  /**< 1 for KEEPON_SENT_OFF_SCHEDULE */
    unsigned reason;   /**< enum keepon_reason when rejected (may be >= KEEPON_R_COUNT from a newer daemon) */
    uint64_t slot;     /**< EPHC slot number (sent) */
    int64_t time;      /**< wire time, TAI ns (sent) */
    uint32_t ring_slot;/**< ownership ring slot (sent) */
};

/** Synchronisation state (`sync` of struct keepon_time). */
enum keepon_sync {
    KEEPON_SYNC_FREE_RUNNING = 0,    /**< no `[ptp]`: the EPHC runs free on the link's clock; submits are not gated */
    KEEPON_SYNC_SYNCHRONISED = 1,    /**< master, or a slave locked within the sync threshold */
    KEEPON_SYNC_NOT_SYNCHRONISED = 2 /**< PTP configured but not synchronised: scheduled submits are refused */
};

/** The PTP port's role (`port` of struct keepon_time). */
enum keepon_port {
    KEEPON_PORT_NONE = 0,   /**< neither master nor slave (listening, passive, or no PTP) */
    KEEPON_PORT_MASTER = 1,
    KEEPON_PORT_SLAVE = 2
};

/** The servo's state (`servo` of struct keepon_time). */
enum keepon_servo {
    KEEPON_SERVO_UNLOCKED = 0,
    KEEPON_SERVO_STEPPING = 1, /**< its last measurement stepped the clock */
    KEEPON_SERVO_LOCKED = 2
};

/** Bits of keepon_time.flags. */
#define KEEPON_TIME_OFFSET_VALID 1u     /**< `offset` holds an estimate */
#define KEEPON_TIME_PATH_DELAY_VALID 2u /**< `path_delay` holds an estimate */
#define KEEPON_TIME_ALIGNMENT_VALID 4u  /**< `align_p50`, `align_p99`, `align_max` hold the wire's alignment */

/** The station's network time and synchronisation state (the Time reply). Times are TAI ns. */
struct keepon_time {
    int sync;            /**< enum keepon_sync */
    int port;            /**< enum keepon_port */
    int servo;           /**< enum keepon_servo */
    unsigned flags;      /**< KEEPON_TIME_OFFSET_VALID | KEEPON_TIME_PATH_DELAY_VALID | KEEPON_TIME_ALIGNMENT_VALID */
    int64_t ephc_now;    /**< the EPHC (network time when synchronised) */
    int64_t host_now;    /**< the daemon host's CLOCK_TAI at the same instant */
    int64_t offset;      /**< the servo's last offset estimate, EPHC − master, ns (0 unless OFFSET_VALID) */
    int64_t freq_ppt;    /**< the servo's frequency adjustment, parts per trillion */
    int64_t path_delay;  /**< the servo's mean path delay estimate, ns (0 unless PATH_DELAY_VALID) */
    int64_t align_p50;   /**< |wire slot start − schedule time| on the EPHC while locked, ns: median, */
    int64_t align_p99;   /**< 99th percentile */
    int64_t align_max;   /**< and maximum (all 0 unless ALIGNMENT_VALID) */
};

/** Kinds of keepon_msg. */
enum keepon_msg_kind {
    KEEPON_MSG_OUTCOME = 1,
    KEEPON_MSG_INFO = 2,
    KEEPON_MSG_ERROR = 3,
    KEEPON_MSG_UNKNOWN = 4,
    KEEPON_MSG_TIME = 5,
    KEEPON_MSG_RELEASED = 6,  /**< a release time (after keepon_subscribe) */
    KEEPON_MSG_SUBSCRIBED = 7 /**< the reply to keepon_subscribe */
};

/** keepon_subscribe() flags. */
#define KEEPON_SUBSCRIBE_RELEASE_TIMES 1u

/** When the host released a sent frame to the kernel (KEEPON_MSG_RELEASED). */
struct keepon_released {
    uint64_t tag;
    int valid;    /**< `time` holds the release time (0: the NIC paces the link, or no report came in time) */
    int stamped;  /**< the time is the kernel's software TX timestamp */
    int64_t time; /**< TAI ns on keepon's clock (0 unless valid) */
};

/** Any response. For KEEPON_MSG_INFO the info is stored in *info_out given to keepon_recv (if not NULL). */
struct keepon_msg {
    int kind;                   /**< enum keepon_msg_kind */
    uint8_t raw_kind;           /**< the kind byte on the wire */
    struct keepon_outcome outcome;
    char text[512];             /**< KEEPON_MSG_ERROR: the daemon's text (truncated, NUL-terminated); after
                                     KEEPON_EPROTO from keepon_parse: what was wrong, if it says */
    struct keepon_time time;    /**< KEEPON_MSG_TIME */
    struct keepon_released released; /**< KEEPON_MSG_RELEASED */
    unsigned subscribed;        /**< KEEPON_MSG_SUBSCRIBED: KEEPON_SUBSCRIBE_* the daemon now does */
};

typedef struct keepon_client keepon_client;

keepon_client *keepon_connect(const char *socket_path);
int keepon_set_timeout(keepon_client *c, int timeout_ms);
int keepon_info(keepon_client *c, struct keepon_info *info);
int keepon_time(keepon_client *c, struct keepon_time *t);
int keepon_subscribe(keepon_client *c, unsigned flags, unsigned *now_flags);
int keepon_submit(keepon_client *c, const char *cls, int64_t txtime, const void *frame, size_t len, uint64_t tag);
int keepon_outcome(keepon_client *c, struct keepon_outcome *out);
int keepon_recv(keepon_client *c, struct keepon_msg *msg, struct keepon_info *info_out);
int keepon_send_raw(keepon_client *c, const void *bytes, size_t len);
int keepon_close_write(keepon_client *c);
void keepon_close(keepon_client *c);
int keepon_fd(const keepon_client *c);
const char *keepon_strerror(const keepon_client *c, int rc);
const char *keepon_reason_name(unsigned code);
const char *keepon_reason_str(unsigned code, char *buf, size_t len);
const char *keepon_info_class(const struct keepon_info *info, unsigned i);
const struct keepon_window *keepon_info_windows(const struct keepon_info *info, unsigned i, unsigned *count);
const char *keepon_sync_name(unsigned sync);

/*
 * Sans-I/O layer (no socket): encode requests, parse responses. Used by the functions above; exposed for
 * programs with their own event loop and for tests.
 *
 * keepon_encode_submit() writes the length-prefixed Submit into buf (cap bytes) and returns its length, or a
 * negative KEEPON_E* code. keepon_encode_info() and keepon_encode_time() likewise (6 bytes each), and
 * keepon_encode_subscribe() (7 bytes; KEEPON_EINVAL for flags it does not know). keepon_parse()
 * parses one message body (without length prefix) from untrusted bytes into *msg (and *info if it is an Info
 * reply and info is not NULL; a Time reply into msg->time); it returns KEEPON_OK or KEEPON_EPROTO (msg->text may say
 * why; a malformed Info reply leaves *info as it was) and never reads outside b[0..n).
 */
long keepon_encode_submit(uint8_t *buf, size_t cap, const char *cls, int64_t txtime, const void *frame, size_t len,
                          uint64_t tag);
long keepon_encode_info(uint8_t *buf, size_t cap);
long keepon_encode_time(uint8_t *buf, size_t cap);
long keepon_encode_subscribe(uint8_t *buf, size_t cap, unsigned flags);
int keepon_parse(const uint8_t *b, size_t n, struct keepon_msg *msg, struct keepon_info *info);

#ifdef __cplusplus
}
#endif

#endif /* KEEPON_H */
