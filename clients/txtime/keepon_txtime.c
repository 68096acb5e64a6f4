/*
 * libkeepon_txtime.so — run an unmodified SO_TXTIME (ETF) program on keepon with LD_PRELOAD.
 *
 *     KEEPON_IFACE=eth1 KEEPON_SOCKET=/run/keepon.sock KEEPON_PRIO_CLASS="3=tc-0,2=tc-1" \
 *         LD_PRELOAD=libkeepon_txtime.so ./my-etf-program
 *
 * WHAT IS INTERCEPTED
 *     An AF_PACKET SOCK_RAW socket becomes a keepon socket when it sets SO_TXTIME (the option also reaches the
 *     kernel, so it fails exactly where it would fail without keepon); so does a SOCK_DGRAM one, whose frames get
 *     the Ethernet header the kernel would give them (destination sll_addr and EtherType sll_protocol of the
 *     sendto/sendmsg address, the interface's MAC as source; a send without an address is left to the kernel). Its frames are taken over when they are
 *     addressed to the interface KEEPON_IFACE (the socket's bound interface, or sll_ifindex of the sendto/sendmsg
 *     address): sendmsg, sendto, send, write and sendmmsg hand each frame to `keepon daemon` with its SCM_TXTIME
 *     and a class, and return the frame's length as the kernel would. recvmsg(MSG_ERRQUEUE) and poll() on such a
 *     socket see the error-queue messages ETF would have queued, built from keepon's outcomes. close() forgets
 *     the socket.
 *
 *     A UDP socket (AF_INET SOCK_DGRAM) that sets SO_TXTIME is a keepon socket too, for datagrams that would
 *     leave through KEEPON_IFACE: the socket is bound to it (SO_BINDTODEVICE), or — not bound to a device — a
 *     multicast destination with IP_MULTICAST_IF set to it (its index or one of its addresses), or else the main
 *     routing table's route to the destination (/proc/net/route: longest prefix, then metric) goes through it.
 *     keepon builds the
 *     frame the kernel would: Ethernet (the interface's MAC; the destination's — 01:00:5e:… for multicast,
 *     ff:…:ff for broadcast, else the neighbour table's complete entry for the next hop, the route's gateway or
 *     the destination itself), IPv4 (the socket's source address or the interface's, TTL from IP_TTL or
 *     IP_MULTICAST_TTL, IP_TOS, DF, header checksum) and UDP (the socket's port — an unbound socket is bound to
 *     an ephemeral one first, as the kernel does at the first send — and checksum). keepon does not resolve
 *     addresses: a unicast next hop without a neighbour entry (`ip neigh add … nud permanent`, usual in a
 *     statically configured TSN network, or one the kernel learnt) fails the send with EHOSTUNREACH; nor does it
 *     fragment: a datagram over the interface's MTU fails EMSGSIZE. Its error queue is a UDP socket's:
 *     SOL_IP/IP_RECVERR messages (with an empty offender address), the whole frame as payload. IP_PKTINFO is not
 *     looked at.
 *
 *     Everything else — other sockets, other interfaces, UDP over IPv6 (a line on stderr says so when such a
 *     socket sets SO_TXTIME), select/epoll/ppoll,
 *     recvmmsg — passes through to libc untouched. Descriptors >= 4096 are never intercepted, nor copies made with
 *     dup/dup2/fcntl(F_DUPFD) (they reach the kernel). No fork() handling: a child must not use the parent's
 *     keepon sockets.
 *
 * CLASS
 *     KEEPON_PRIO_CLASS maps the socket's SO_PRIORITY to a keepon class, like mqprio/taprio's priority → traffic
 *     class map: "3=tc-0,2=tc-1,*=tc-2". Without an entry (and without "*"), priority p uses the daemon's class
 *     number p; no such class → the daemon rejects the frame (unknown-class).
 *
 * WHAT ETF WOULD DO, AND WHAT THIS DOES (ETF configured with clockid CLOCK_TAI, deadline_mode off)
 *     - SO_TXTIME with a clockid other than CLOCK_TAI, or with SOF_TXTIME_DEADLINE_MODE: every frame is refused
 *       at enqueue — send returns -1/ENOBUFS and, with SOF_TXTIME_REPORT_ERRORS, the error queue gets EINVAL
 *       SO_EE_CODE_TXTIME_INVALID_PARAM. Not sent to keepon.
 *     - txtime before now (CLOCK_TAI) when sent, or no SCM_TXTIME (txtime 0): the same. Not sent to keepon.
 *       A UDP send "succeeds" in these cases unless the socket set IP_RECVERR: UDP hides the qdisc's ENOBUFS
 *       (seen on ETF in the QEMU bench); the error-queue message is queued all the same.
 *     - keepon rejects the frame `late` (its slot was already posted to the NIC) or `underrun`, `link-fault`,
 *       `shutdown`, `clock-step`, `not-synchronised` (it missed its time): ECANCELED SO_EE_CODE_TXTIME_MISSED, as ETF reports a frame dequeued
 *       after its time.
 *     - any other rejection (not-owned, schedule-change, slot-taken, forbidden, unknown-class, oversize,
 *       too-far-ahead, queue-full, ...): EINVAL SO_EE_CODE_TXTIME_INVALID_PARAM.
 *     Both error kinds carry the txtime (ee_info low 32 bits, ee_data high 32 bits) and the frame as payload,
 *     under SOL_PACKET/PACKET_TX_TIMESTAMP, and are queued only with SOF_TXTIME_REPORT_ERRORS, like ETF. Before
 *     the error come the timestamps the kernel gives an ETF error (the skb's timestamp, which is the txtime): an
 *     SO_TIMESTAMPING message with ts[0] = the txtime where the socket asked for SOF_TIMESTAMPING_SOFTWARE, and
 *     SO_TIMESTAMP(NS) with the txtime where those are on.
 *     - keepon sends the frame: with SO_TIMESTAMPING TX_HARDWARE|RAW_HARDWARE the error queue gets a TX
 *       timestamp with ts[2] = the frame's slot time on keepon's clock (TAI, exact where the NIC paces the link);
 *       with TX_SOFTWARE|SOFTWARE, ts[0] = when the host handed the frame to the kernel, as a kernel software TX
 *       stamp says: on a host-paced link (veth, AF_PACKET without a wire clock) the release time keepon's daemon
 *       reports for the frame (its kernel TX stamp, or its estimate; microseconds after the slot time), else the
 *       slot time itself (the NIC paces the wire, or no release time came within a second) — on CLOCK_REALTIME
 *       (minus the kernel's TAI offset when the message is read). One message per frame, queued once both are
 *       known (SO_EE_ORIGIN_TIMESTAMPING, SCM_TSTAMP_SND, ee_data = OPT_ID key, no payload with OPT_TSONLY). A
 *       frame sent off its scheduled slot after an underrun is reported sent, like any other.
 *     ON THE WIRE, keepon in slot mode (the default) differs from ETF in two ways: a frame leaves at the start
 *     of the slot that holds its txtime, up to one slot (δ) before the txtime, which ETF never does; and it is
 *     padded to the slot size (the program's bytes, then padding the receiving stack ignores). A daemon on the
 *     byte clock (link.timing = "bytes") sends each frame on the byte nearest its txtime (within half a byte),
 *     unpadded.
 *     KEEPON_TXTIME_LOG=1 logs every frame's keepon outcome (with keepon's own reason) to stderr.
 *     If the daemon cannot be reached, sends on keepon sockets fail with ENETDOWN (no reconnection); if it goes
 *     away, every frame still waiting for its outcome is reported MISSED.
 *
 * Reentrancy: the wrappers call libc through pointers from dlsym(RTLD_NEXT); the client code (keepon.c, compiled
 * in) reaches the wrappers only for the daemon's own descriptor, which is never a keepon socket, so it passes
 * through without taking the lock.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <time.h> /* before linux/errqueue.h, which uses struct timespec */
#include <linux/errqueue.h>
#include <linux/if_packet.h>
#include <linux/net_tstamp.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "../c/keepon.h"
#include "udp4.h"

#ifndef SO_TXTIME
#define SO_TXTIME 61
#define SCM_TXTIME SO_TXTIME
#endif
#ifndef SO_TIMESTAMPING_OLD
#define SO_TIMESTAMPING_OLD 37
#endif
#ifndef SO_TIMESTAMP_OLD
#define SO_TIMESTAMP_OLD 29
#endif
#ifndef SO_TIMESTAMPNS_OLD
#define SO_TIMESTAMPNS_OLD 35
#endif
#ifndef SO_TIMESTAMP_NEW
#define SO_TIMESTAMP_NEW 63
#endif
#ifndef SO_TIMESTAMPNS_NEW
#define SO_TIMESTAMPNS_NEW 64
#endif
#ifndef SO_TIMESTAMPING_NEW
#define SO_TIMESTAMPING_NEW 65
#endif
#ifndef SO_EE_ORIGIN_TXTIME
#define SO_EE_ORIGIN_TXTIME 6
#define SO_EE_CODE_TXTIME_INVALID_PARAM 1
#define SO_EE_CODE_TXTIME_MISSED 2
#endif

#define EXPORT __attribute__((visibility("default")))
#define MAX_FD 4096
#define MAX_PENDING 65536

/* One error-queue message. */
struct errmsg {
    struct errmsg *next;
    int tstamp;                /* 1: TX timestamp, 0: txtime error */
    struct sock_extended_err ee;
    int64_t tai;               /* TX timestamp: slot time, TAI ns (the "hardware" stamp) */
    int64_t released;          /* TX timestamp: when the host released it, TAI ns (the "software" stamp) */
    size_t len;
    uint8_t data[];            /* the frame (empty with OPT_TSONLY) */
};

/* A keepon socket. */
struct ksock {
    uint64_t gen;         /* distinguishes a reused descriptor */
    clockid_t clockid;
    uint32_t txflags;     /* SOF_TXTIME_* */
    uint32_t tsflags;     /* SOF_TIMESTAMPING_* */
    int ts_new;           /* the program set SO_TIMESTAMPING_NEW */
    int rcvts;            /* SO_TIMESTAMP(NS)_OLD/_NEW the program turned on (0: off) */
    uint32_t tskey;
    int udp;              /* a UDP (IPv4) socket: keepon sends its datagrams as Ethernet/IPv4/UDP frames */
    int dgram;            /* an AF_PACKET SOCK_DGRAM socket: keepon puts the Ethernet header before its data */
    int mc_ifindex;       /* IP_MULTICAST_IF given by interface index (struct ip_mreqn), which getsockopt hides */
    uint16_t ip_id;       /* the IPv4 identification of its next datagram */
    struct {              /* the last UDP destination: its route and headers, kept for UDP_ROUTE_TTL_NS */
        int valid, ours;
        int64_t until;    /* CLOCK_MONOTONIC ns */
        struct sockaddr_in to;
        uint8_t head[UDP4_HEAD]; /* Ethernet, IPv4, UDP: all but lengths, identification and checksums */
    } route;
    size_t queued;
    struct errmsg *head, *tail;
};

/* Most error-queue messages kept per socket (the kernel bounds the queue by the receive buffer); beyond it new
 * ones are dropped and logged. */
#define MAX_QUEUED 65536

/* How long a UDP socket's route and headers to its last destination are reused (reading the routing and neighbour
 * tables costs tens of µs per datagram); any setsockopt on the socket drops them at once. */
#define UDP_ROUTE_TTL_NS 1000000000LL

/* A frame handed to the daemon, waiting for its outcome. */
struct pending {
    int used;
    uint64_t tag;
    int fd;
    uint64_t gen;
    int64_t txtime;
    uint32_t tskey;
    size_t len;
    uint8_t *frame;
    int sent;       /* its outcome said sent; waiting for its release time */
    int64_t slot;   /* ... and the slot time it said */
};

static struct {
    pthread_mutex_t lk;
    pthread_once_t once;
    int ifindex; /* 0: intercept nothing */
    struct udp4_link link; /* KEEPON_IFACE, for the frames of UDP datagrams */
    int log;
    const char *socket_path;
    char prio_class[64][64];
    char prio_default[64];
    keepon_client *daemon;
    int release_times; /* the daemon follows each sent outcome with a release time */
    struct keepon_info info;
    int daemon_failed;
    uint64_t next_gen;
    uint64_t next_tag;
    struct ksock *socks[MAX_FD];
    struct pending pending[MAX_PENDING];
    /* libc */
    int (*setsockopt)(int, int, int, const void *, socklen_t);
    ssize_t (*sendmsg)(int, const struct msghdr *, int);
    ssize_t (*sendto)(int, const void *, size_t, int, const struct sockaddr *, socklen_t);
    ssize_t (*send)(int, const void *, size_t, int);
    ssize_t (*write)(int, const void *, size_t);
    int (*sendmmsg)(int, struct mmsghdr *, unsigned int, int);
    ssize_t (*recvmsg)(int, struct msghdr *, int);
    int (*close)(int);
    int (*poll)(struct pollfd *, nfds_t, int);
} g = {.lk = PTHREAD_MUTEX_INITIALIZER, .once = PTHREAD_ONCE_INIT};

/* Set while this thread holds the lock: libc calls made then (by the client code) pass straight through. */
static __thread int inside;

static void lock(void) {
    pthread_mutex_lock(&g.lk);
    inside = 1;
}

static void unlock(void) {
    inside = 0;
    pthread_mutex_unlock(&g.lk);
}

/* Fast, lock-free membership test; the lock protects the contents. */
static _Atomic(uint8_t) tracked[MAX_FD];

static void logf_(const char *fmt, ...) {
    if (!g.log) return;
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n > 0) (void)!g.write(2, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

static void init(void) {
    g.setsockopt = dlsym(RTLD_NEXT, "setsockopt");
    g.sendmsg = dlsym(RTLD_NEXT, "sendmsg");
    g.sendto = dlsym(RTLD_NEXT, "sendto");
    g.send = dlsym(RTLD_NEXT, "send");
    g.write = dlsym(RTLD_NEXT, "write");
    g.sendmmsg = dlsym(RTLD_NEXT, "sendmmsg");
    g.recvmsg = dlsym(RTLD_NEXT, "recvmsg");
    g.close = dlsym(RTLD_NEXT, "close");
    g.poll = dlsym(RTLD_NEXT, "poll");
    const char *l = getenv("KEEPON_TXTIME_LOG");
    g.log = l && *l && strcmp(l, "0") != 0;
    const char *s = getenv("KEEPON_SOCKET");
    g.socket_path = s && *s ? s : "/run/keepon.sock";
    const char *ifname = getenv("KEEPON_IFACE");
    g.ifindex = ifname && *ifname ? (int)if_nametoindex(ifname) : 0;
    if (ifname && *ifname && g.ifindex == 0) logf_("keepon_txtime: no interface %s: nothing intercepted\n", ifname);
    if (g.ifindex) {
        snprintf(g.link.ifname, sizeof g.link.ifname, "%s", ifname);
        g.link.ifindex = g.ifindex;
        struct ifreq r;
        memset(&r, 0, sizeof r);
        snprintf(r.ifr_name, sizeof r.ifr_name, "%s", ifname);
        int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (s >= 0 && ioctl(s, SIOCGIFHWADDR, &r) == 0) memcpy(g.link.mac, r.ifr_hwaddr.sa_data, 6);
        g.link.mtu = s >= 0 && ioctl(s, SIOCGIFMTU, &r) == 0 ? r.ifr_mtu : 1500;
        if (s >= 0) g.close(s);
    }
    const char *map = getenv("KEEPON_PRIO_CLASS");
    if (map) {
        char copy[1024];
        snprintf(copy, sizeof copy, "%s", map);
        for (char *save = NULL, *e = strtok_r(copy, ",", &save); e; e = strtok_r(NULL, ",", &save)) {
            char *eq = strchr(e, '=');
            if (!eq) continue;
            *eq = 0;
            if (strcmp(e, "*") == 0) {
                snprintf(g.prio_default, sizeof g.prio_default, "%s", eq + 1);
            } else {
                char *end;
                long p = strtol(e, &end, 10);
                if (*end == 0 && p >= 0 && p < 64) snprintf(g.prio_class[p], sizeof g.prio_class[p], "%s", eq + 1);
            }
        }
    }
}

static void ensure_init(void) { pthread_once(&g.once, init); }

static int is_tracked(int fd) { return !inside && fd >= 0 && fd < MAX_FD && atomic_load(&tracked[fd]); }

static int64_t now_ns(clockid_t c) {
    struct timespec ts;
    clock_gettime(c, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- error queue ------------------------------------------------------------------------------------------- */

static void push_err(struct ksock *k, struct errmsg *m) {
    if (k->queued >= MAX_QUEUED) {
        logf_("keepon_txtime: error queue full (%d messages): one dropped\n", MAX_QUEUED);
        free(m);
        return;
    }
    k->queued++;
    m->next = NULL;
    if (k->tail)
        k->tail->next = m;
    else
        k->head = m;
    k->tail = m;
}

static struct errmsg *new_err(const void *frame, size_t len) {
    struct errmsg *m = calloc(1, sizeof *m + len);
    if (m && len) memcpy(m->data, frame, len);
    if (m) m->len = len;
    return m;
}

/* A txtime error, queued only with SOF_TXTIME_REPORT_ERRORS (like ETF). */
static void txtime_error(struct ksock *k, int err, int code, int64_t txtime, const void *frame, size_t len) {
    if (!(k->txflags & SOF_TXTIME_REPORT_ERRORS)) return;
    struct errmsg *m = new_err(frame, len);
    if (!m) return;
    m->ee.ee_errno = (uint32_t)err;
    m->ee.ee_origin = SO_EE_ORIGIN_TXTIME;
    m->ee.ee_code = (uint8_t)code;
    m->ee.ee_info = (uint32_t)(uint64_t)txtime;
    m->ee.ee_data = (uint32_t)((uint64_t)txtime >> 32);
    push_err(k, m);
}

static void tx_timestamp(struct ksock *k, int64_t tai, int64_t released, uint32_t key, const void *frame,
                         size_t len) {
    if (!(k->tsflags & (SOF_TIMESTAMPING_TX_SOFTWARE | SOF_TIMESTAMPING_TX_HARDWARE))) return;
    int tsonly = k->tsflags & SOF_TIMESTAMPING_OPT_TSONLY;
    struct errmsg *m = new_err(frame, tsonly ? 0 : len);
    if (!m) return;
    m->tstamp = 1;
    m->tai = tai;
    m->released = released;
    m->ee.ee_errno = ENOMSG;
    m->ee.ee_origin = SO_EE_ORIGIN_TIMESTAMPING;
    m->ee.ee_info = SCM_TSTAMP_SND;
    m->ee.ee_data = (k->tsflags & SOF_TIMESTAMPING_OPT_ID) ? key : 0;
    push_err(k, m);
}

/* ---- the daemon -------------------------------------------------------------------------------------------- */

static int daemon_up(void) {
    if (g.daemon) return 1;
    if (g.daemon_failed) return 0;
    g.daemon = keepon_connect(g.socket_path);
    if (!g.daemon) {
        g.daemon_failed = 1;
        logf_("keepon_txtime: cannot connect to %s: %s\n", g.socket_path, strerror(errno));
        return 0;
    }
    keepon_set_timeout(g.daemon, 10000);
    int rc = keepon_info(g.daemon, &g.info);
    if (rc != KEEPON_OK) {
        logf_("keepon_txtime: %s: %s\n", g.socket_path, keepon_strerror(g.daemon, rc));
        keepon_close(g.daemon);
        g.daemon = NULL;
        g.daemon_failed = 1;
        return 0;
    }
    /* Release times, for software TX stamps as the kernel gives them (when the frame left the host). A daemon
     * that predates them says so; then the slot time stands for both stamps. */
    unsigned now = 0;
    rc = keepon_subscribe(g.daemon, KEEPON_SUBSCRIBE_RELEASE_TIMES, &now);
    if (rc != KEEPON_OK && rc != KEEPON_EREQUEST) {
        logf_("keepon_txtime: %s: %s\n", g.socket_path, keepon_strerror(g.daemon, rc));
        keepon_close(g.daemon);
        g.daemon = NULL;
        g.daemon_failed = 1;
        return 0;
    }
    g.release_times = rc == KEEPON_OK && (now & KEEPON_SUBSCRIBE_RELEASE_TIMES);
    keepon_set_timeout(g.daemon, 0);
    return 1;
}

/* A pending frame is done: free its slot. */
static void drop_pending(struct pending *p) {
    free(p->frame);
    memset(p, 0, sizeof *p);
}

/* The socket a pending frame was sent on, if it is still open (not closed and its descriptor reused). */
static struct ksock *pending_sock(const struct pending *p) {
    struct ksock *k = p->fd >= 0 && p->fd < MAX_FD ? g.socks[p->fd] : NULL;
    return k && k->gen == p->gen ? k : NULL;
}

static void deliver(const struct keepon_outcome *o) {
    struct pending *p = &g.pending[o->tag % MAX_PENDING];
    if (!p->used || p->tag != o->tag || p->sent) return;
    struct ksock *k = pending_sock(p);
    char why[32];
    if (o->sent)
        logf_("keepon_txtime: fd %d txtime %lld: sent at %lld (slot %llu, ring slot %u)%s\n", p->fd,
              (long long)p->txtime, (long long)o->time, (unsigned long long)o->slot, o->ring_slot,
              o->off_schedule ? " off schedule" : "");
    else
        logf_("keepon_txtime: fd %d txtime %lld: rejected %s\n", p->fd, (long long)p->txtime,
              keepon_reason_str(o->reason, why, sizeof why));
    if (o->sent && g.release_times) { /* its stamp waits for the release time that follows */
        p->sent = 1;
        p->slot = o->time;
        return;
    }
    if (k) {
        if (o->sent) {
            tx_timestamp(k, o->time, o->time, p->tskey, p->frame, p->len);
        } else {
            int missed = o->reason == KEEPON_R_LATE || o->reason == KEEPON_R_UNDERRUN ||
                         o->reason == KEEPON_R_LINK_FAULT || o->reason == KEEPON_R_SHUTDOWN ||
                         o->reason == KEEPON_R_CLOCK_STEP || o->reason == KEEPON_R_NOT_SYNCHRONISED;
            txtime_error(k, missed ? ECANCELED : EINVAL,
                         missed ? SO_EE_CODE_TXTIME_MISSED : SO_EE_CODE_TXTIME_INVALID_PARAM, p->txtime, p->frame,
                         p->len);
        }
    }
    drop_pending(p);
}

/* The release time of a sent frame: its TX timestamp is complete. */
static void deliver_release(const struct keepon_released *r) {
    struct pending *p = &g.pending[r->tag % MAX_PENDING];
    if (!p->used || p->tag != r->tag || !p->sent) return;
    struct ksock *k = pending_sock(p);
    int64_t released = r->valid ? r->time : p->slot;
    if (r->valid)
        logf_("keepon_txtime: fd %d txtime %lld: released to the kernel at %lld (%lld ns after its slot)%s\n", p->fd,
              (long long)p->txtime, (long long)r->time, (long long)(r->time - p->slot),
              r->stamped ? "" : " (estimated)");
    if (k) tx_timestamp(k, p->slot, released, p->tskey, p->frame, p->len);
    drop_pending(p);
}

/* The daemon is gone: every frame still waiting for its outcome ends as missed (it may or may not have left; its
 * slot time is unknown), one reported sent gets its TX timestamp without a release time, so none is silently
 * lost. Lock held. */
static void fail_pending(void) {
    for (size_t i = 0; i < MAX_PENDING; i++) {
        struct pending *p = &g.pending[i];
        if (!p->used) continue;
        struct ksock *k = pending_sock(p);
        if (p->sent) { /* it was sent: its stamp, without a release time */
            logf_("keepon_txtime: fd %d txtime %lld: no release time, the daemon went away\n", p->fd,
                  (long long)p->txtime);
            if (k) tx_timestamp(k, p->slot, p->slot, p->tskey, p->frame, p->len);
        } else {
            logf_("keepon_txtime: fd %d txtime %lld: no outcome, the daemon went away\n", p->fd, (long long)p->txtime);
            if (k) txtime_error(k, ECANCELED, SO_EE_CODE_TXTIME_MISSED, p->txtime, p->frame, p->len);
        }
        drop_pending(p);
    }
}

/* Read every outcome and release time that has arrived, without waiting. Lock held. */
static void pump(void) {
    if (!g.daemon) return;
    for (;;) {
        struct keepon_msg m;
        int rc = keepon_recv(g.daemon, &m, NULL);
        if (rc == KEEPON_OK) {
            if (m.kind == KEEPON_MSG_OUTCOME) deliver(&m.outcome);
            if (m.kind == KEEPON_MSG_RELEASED) deliver_release(&m.released);
            if (m.kind == KEEPON_MSG_ERROR) logf_("keepon_txtime: daemon: %s\n", m.text);
            continue;
        }
        if (rc != KEEPON_ETIMEDOUT) {
            logf_("keepon_txtime: daemon: %s\n", keepon_strerror(g.daemon, rc));
            if (rc == KEEPON_ECLOSED || rc == KEEPON_EPROTO || rc == KEEPON_ESYS) {
                keepon_close(g.daemon);
                g.daemon = NULL;
                g.daemon_failed = 1;
                fail_pending();
            }
        }
        return;
    }
}

static const char *class_of(int prio) {
    if (prio >= 0 && prio < 64 && g.prio_class[prio][0]) return g.prio_class[prio];
    if (g.prio_default[0]) return g.prio_default;
    const char *c = prio >= 0 ? keepon_info_class(&g.info, (unsigned)prio) : NULL;
    return c ? c : "";
}

/* ---- sending ----------------------------------------------------------------------------------------------- */

/* The interface a frame goes to: the address's, else the socket's bound one. */
static int target_ifindex(int fd, const void *addr, socklen_t alen) {
    if (addr && alen >= sizeof(struct sockaddr_ll)) {
        const struct sockaddr_ll *a = addr;
        if (a->sll_ifindex) return a->sll_ifindex;
    }
    struct sockaddr_ll b;
    socklen_t bl = sizeof b;
    memset(&b, 0, sizeof b);
    if (getsockname(fd, (struct sockaddr *)&b, &bl) != 0 || b.sll_family != AF_PACKET) return 0;
    return b.sll_ifindex;
}

/* Whether a datagram from UDP socket `fd` to `to` leaves through KEEPON_IFACE, and if so its headers (*err: 0 or
 * the -errno of udp_head). Reused from the socket's last destination for UDP_ROUTE_TTL_NS. Lock not held. */
static int udp_route(int fd, const struct sockaddr_in *to, uint8_t head[UDP4_HEAD], int *err) {
    int64_t now = now_ns(CLOCK_MONOTONIC);
    lock();
    struct ksock *k = g.socks[fd];
    int hit = k && k->route.valid && now < k->route.until && k->route.to.sin_addr.s_addr == to->sin_addr.s_addr &&
              k->route.to.sin_port == to->sin_port;
    int ours = hit && k->route.ours, mc_ifindex = k ? k->mc_ifindex : 0;
    if (ours) memcpy(head, k->route.head, UDP4_HEAD);
    unlock();
    *err = 0;
    if (hit) return ours;
    ours = udp4_goes_out(&g.link, fd, ntohl(to->sin_addr.s_addr), mc_ifindex);
    if (ours) *err = udp4_head(&g.link, fd, to, head);
    lock();
    k = g.socks[fd];
    if (k && !*err) {
        k->route.valid = 1;
        k->route.ours = ours;
        k->route.until = now + UDP_ROUTE_TTL_NS;
        k->route.to = *to;
        if (ours) memcpy(k->route.head, head, UDP4_HEAD);
    }
    unlock();
    return ours;
}

/* 1 and the txtime if the message carries SCM_TXTIME. */
static int txtime_of(const struct msghdr *m, int64_t *t) {
    if (!m || !m->msg_control) return 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR((struct msghdr *)m); c; c = CMSG_NXTHDR((struct msghdr *)m, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TXTIME && c->cmsg_len >= CMSG_LEN(sizeof(uint64_t))) {
            uint64_t v;
            memcpy(&v, CMSG_DATA(c), sizeof v);
            *t = (int64_t)v;
            return 1;
        }
    }
    return 0;
}

/* Returns 1 (handled; *ret is the result, errno set on -1) or 0 (not ours: pass through). */
static int keepon_send(int fd, const struct msghdr *m, const void *buf, size_t buflen, int use_msg, ssize_t *ret) {
    ensure_init();
    if (!is_tracked(fd) || g.ifindex == 0) return 0;
    const void *addr = use_msg ? m->msg_name : NULL;
    socklen_t alen = use_msg ? m->msg_namelen : 0;
    if (!use_msg && m) { /* sendto: the address rides in m->msg_name */
        addr = m->msg_name;
        alen = m->msg_namelen;
    }
    lock();
    int udp = g.socks[fd] && g.socks[fd]->udp, dgram = g.socks[fd] && g.socks[fd]->dgram;
    unlock();
    /* SOCK_DGRAM: the kernel builds the Ethernet header from the address (sll_addr, sll_protocol); without one it
     * refuses the send, so such a send is left to it. */
    const struct sockaddr_ll *ll = addr;
    if (dgram && !(addr && alen >= sizeof *ll && ll->sll_family == AF_PACKET && ll->sll_halen == 6)) return 0;
    struct sockaddr_in to;
    memset(&to, 0, sizeof to);
    uint8_t head[UDP4_HEAD];
    int head_err = 0;
    if (udp) {
        socklen_t tl = sizeof to;
        if (addr && alen >= sizeof to && ((const struct sockaddr *)addr)->sa_family == AF_INET)
            memcpy(&to, addr, sizeof to);
        else if (addr || getpeername(fd, (struct sockaddr *)&to, &tl) != 0 || to.sin_family != AF_INET)
            return 0; /* not an IPv4 destination (or none: the kernel says EDESTADDRREQ) */
        if (!udp_route(fd, &to, head, &head_err)) return 0;
    } else if (target_ifindex(fd, addr, alen) != g.ifindex) {
        return 0;
    }

    /* The frame as one buffer: the data, after the headers keepon puts before it (UDP: Ethernet, IPv4, UDP;
     * SOCK_DGRAM: Ethernet). */
    uint8_t frame[KEEPON_MAX_MESSAGE];
    const size_t off = udp ? UDP4_HEAD : dgram ? 14 : 0;
    size_t len = 0;
    if (use_msg) {
        for (size_t i = 0; i < (size_t)m->msg_iovlen; i++) {
            size_t n = m->msg_iov[i].iov_len;
            if (off + len + n > sizeof frame) {
                errno = EMSGSIZE;
                *ret = -1;
                return 1;
            }
            memcpy(frame + off + len, m->msg_iov[i].iov_base, n);
            len += n;
        }
    } else {
        if (off + buflen > sizeof frame) {
            errno = EMSGSIZE;
            *ret = -1;
            return 1;
        }
        memcpy(frame + off, buf, buflen);
        len = buflen;
    }
    if (udp) {
        lock();
        struct ksock *k = g.socks[fd];
        ssize_t n = head_err ? head_err : !k ? -EBADF : udp4_frame(&g.link, head, k->ip_id++, len, frame);
        unlock();
        if (n < 0) {
            char a[INET_ADDRSTRLEN];
            logf_("keepon_txtime: fd %d: datagram to %s:%u not sent: %s\n", fd,
                  inet_ntop(AF_INET, &to.sin_addr, a, sizeof a), ntohs(to.sin_port),
                  n == -EHOSTUNREACH ? "no neighbour entry for its next hop on the keepon interface (keepon does not "
                                       "resolve addresses: add one with `ip neigh`)"
                                     : strerror((int)-n));
            errno = (int)-n;
            *ret = -1;
            return 1;
        }
        len = (size_t)n;
    } else if (dgram) {
        if (len > (size_t)g.link.mtu) {
            errno = EMSGSIZE;
            *ret = -1;
            return 1;
        }
        memcpy(frame, ll->sll_addr, 6);
        memcpy(frame + 6, g.link.mac, 6);
        memcpy(frame + 12, &ll->sll_protocol, 2);
        len += 14;
    }
    int64_t txtime = 0;
    if (use_msg) txtime_of(m, &txtime);
    int prio = 0;
    socklen_t pl = sizeof prio;
    getsockopt(fd, SOL_SOCKET, SO_PRIORITY, &prio, &pl);

    lock();
    struct ksock *k = g.socks[fd];
    if (!k) { /* closed meanwhile */
        unlock();
        return 0;
    }
    pump();
    uint32_t key = k->tskey++; /* the kernel assigns the OPT_ID key at send, before the qdisc sees the frame */
    /* ETF's enqueue checks: its clock, its mode, a txtime not yet passed. */
    if (k->clockid != CLOCK_TAI || (k->txflags & SOF_TXTIME_DEADLINE_MODE) || txtime < now_ns(CLOCK_TAI)) {
        logf_("keepon_txtime: fd %d txtime %lld: refused (%s)\n", fd, (long long)txtime,
              k->clockid != CLOCK_TAI ? "clockid is not CLOCK_TAI"
              : (k->txflags & SOF_TXTIME_DEADLINE_MODE) ? "deadline mode"
                                                        : "txtime has passed");
        txtime_error(k, EINVAL, SO_EE_CODE_TXTIME_INVALID_PARAM, txtime, frame, len);
        unlock();
        /* The qdisc's drop is ENOBUFS from send; UDP hides it unless the socket set IP_RECVERR (udp_send_skb), so
         * such a send "succeeds" (seen on ETF in the QEMU bench). */
        int recverr = 0;
        socklen_t rl = sizeof recverr;
        if (udp && !(getsockopt(fd, IPPROTO_IP, IP_RECVERR, &recverr, &rl) == 0 && recverr)) {
            *ret = (ssize_t)(len - UDP4_HEAD);
            return 1;
        }
        errno = ENOBUFS;
        *ret = -1;
        return 1;
    }
    if (!daemon_up()) {
        unlock();
        errno = ENETDOWN;
        *ret = -1;
        return 1;
    }
    uint64_t tag = g.next_tag;
    struct pending *p = &g.pending[tag % MAX_PENDING];
    if (p->used) { /* as many frames in flight as slots here: the kernel would say the same */
        unlock();
        errno = ENOBUFS;
        *ret = -1;
        return 1;
    }
    int rc = keepon_submit(g.daemon, class_of(prio), txtime, frame, len, tag);
    if (rc != KEEPON_OK) {
        logf_("keepon_txtime: submit: %s\n", keepon_strerror(g.daemon, rc));
        unlock();
        errno = rc == KEEPON_EINVAL ? EMSGSIZE : ENETDOWN;
        *ret = -1;
        return 1;
    }
    g.next_tag++;
    p->used = 1;
    p->tag = tag;
    p->fd = fd;
    p->gen = k->gen;
    p->txtime = txtime;
    p->tskey = key;
    p->len = len;
    p->frame = malloc(len ? len : 1);
    if (p->frame) memcpy(p->frame, frame, len);
    else p->len = 0;
    unlock();
    *ret = (ssize_t)(udp ? len - UDP4_HEAD : dgram ? len - 14 : len); /* what the program handed over */
    return 1;
}

EXPORT ssize_t sendmsg(int fd, const struct msghdr *m, int flags) {
    ensure_init();
    ssize_t r;
    if (is_tracked(fd) && keepon_send(fd, m, NULL, 0, 1, &r)) return r;
    return g.sendmsg(fd, m, flags);
}

EXPORT ssize_t sendto(int fd, const void *buf, size_t len, int flags, const struct sockaddr *a, socklen_t alen) {
    ensure_init();
    ssize_t r;
    struct msghdr m = {.msg_name = (void *)a, .msg_namelen = alen};
    if (is_tracked(fd) && keepon_send(fd, &m, buf, len, 0, &r)) return r;
    return g.sendto(fd, buf, len, flags, a, alen);
}

EXPORT ssize_t send(int fd, const void *buf, size_t len, int flags) {
    ensure_init();
    ssize_t r;
    if (is_tracked(fd) && keepon_send(fd, NULL, buf, len, 0, &r)) return r;
    return g.send(fd, buf, len, flags);
}

EXPORT ssize_t write(int fd, const void *buf, size_t len) {
    ensure_init();
    ssize_t r;
    if (is_tracked(fd) && keepon_send(fd, NULL, buf, len, 0, &r)) return r;
    return g.write(fd, buf, len);
}

EXPORT int sendmmsg(int fd, struct mmsghdr *v, unsigned int n, int flags) {
    ensure_init();
    if (!is_tracked(fd)) return g.sendmmsg(fd, v, n, flags);
    unsigned int i;
    for (i = 0; i < n; i++) {
        ssize_t r;
        if (!keepon_send(fd, &v[i].msg_hdr, NULL, 0, 1, &r)) r = g.sendmsg(fd, &v[i].msg_hdr, flags);
        if (r < 0) return i > 0 ? (int)i : -1;
        v[i].msg_len = (unsigned int)r;
    }
    return (int)i;
}

/* ---- socket options and lifetime ------------------------------------------------------------------------- */

static struct ksock *sock_of(int fd) { return fd >= 0 && fd < MAX_FD ? g.socks[fd] : NULL; }

/* The socket's record, made (untracked until SO_TXTIME) if it has none: options set before SO_TXTIME are
 * remembered. NULL when out of memory. Lock held. */
static struct ksock *record_of(int fd) {
    struct ksock *k = g.socks[fd];
    if (!k) {
        k = calloc(1, sizeof *k);
        if (k) {
            k->gen = ++g.next_gen;
            k->clockid = -1;
            g.socks[fd] = k;
        }
    }
    return k;
}

EXPORT int setsockopt(int fd, int level, int name, const void *val, socklen_t len) {
    ensure_init();
    int r = g.setsockopt(fd, level, name, val, len);
    if (r == 0 && !inside && fd >= 0 && fd < MAX_FD && atomic_load(&tracked[fd])) {
        lock(); /* TTL, TOS, the device, the multicast interface … may have changed: build the headers anew */
        if (g.socks[fd]) g.socks[fd]->route.valid = 0;
        unlock();
    }
    if (r != 0 || inside || fd < 0 || fd >= MAX_FD || g.ifindex == 0) return r;
    if (level == IPPROTO_IP && name == IP_MULTICAST_IF && val) {
        /* The kernel reports only the address form back; an interface index (ip_mreqn) is remembered here. */
        struct ip_mreqn mr;
        memset(&mr, 0, sizeof mr);
        if (len >= sizeof mr) memcpy(&mr, val, sizeof mr);
        lock();
        struct ksock *k = record_of(fd);
        if (k) k->mc_ifindex = mr.imr_ifindex;
        unlock();
        return r;
    }
    if (level != SOL_SOCKET) return r;
    if (name == SO_TXTIME && val && len >= sizeof(struct sock_txtime)) {
        int dom = 0, type = 0;
        socklen_t l1 = sizeof dom, l2 = sizeof type;
        if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &l1) != 0 ||
            getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l2) != 0)
            return r;
        if (dom == AF_INET6 && type == SOCK_DGRAM) {
            /* Not taken over: say so even without KEEPON_TXTIME_LOG, since the kernel then sends its datagrams
             * on the keepon interface at once, whatever their txtime. */
            char msg[160];
            int n = snprintf(msg, sizeof msg,
                             "keepon_txtime: fd %d: UDP over IPv6 is not taken over by keepon: its datagrams go to "
                             "the kernel\n",
                             fd);
            if (n > 0) (void)!g.write(2, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);
            return r;
        }
        if (!((dom == AF_PACKET && (type == SOCK_RAW || type == SOCK_DGRAM)) || (dom == AF_INET && type == SOCK_DGRAM)))
            return r;
        const struct sock_txtime *t = val;
        lock();
        struct ksock *k = record_of(fd);
        if (!k) {
            unlock();
            return r;
        }
        k->clockid = t->clockid;
        k->txflags = t->flags;
        k->udp = dom == AF_INET;
        k->dgram = dom == AF_PACKET && type == SOCK_DGRAM;
        atomic_store(&tracked[fd], 1);
        unlock();
        logf_("keepon_txtime: fd %d (%s): SO_TXTIME clockid %d flags %#x\n", fd,
              dom == AF_INET ? "UDP" : type == SOCK_DGRAM ? "AF_PACKET SOCK_DGRAM" : "AF_PACKET", (int)t->clockid,
              t->flags);
    } else if ((name == SO_TIMESTAMP_OLD || name == SO_TIMESTAMPNS_OLD || name == SO_TIMESTAMP_NEW ||
                name == SO_TIMESTAMPNS_NEW) &&
               val && len >= sizeof(int)) {
        /* Remembered for every socket, as SO_TIMESTAMPING: turning either on selects it, off turns both off. */
        int on;
        memcpy(&on, val, sizeof on);
        lock();
        struct ksock *k = record_of(fd);
        if (k) k->rcvts = on ? name : 0;
        unlock();
    } else if ((name == SO_TIMESTAMPING_OLD || name == SO_TIMESTAMPING_NEW) && val && len >= sizeof(int)) {
        /* Remembered for every socket: SO_TXTIME may come later. */
        int flags;
        memcpy(&flags, val, sizeof flags);
        lock();
        struct ksock *k = record_of(fd);
        if (k) {
            k->tsflags = (uint32_t)flags;
            k->ts_new = name == SO_TIMESTAMPING_NEW;
        }
        unlock();
    }
    return r;
}

static void forget(int fd) {
    if (fd < 0 || fd >= MAX_FD) return;
    lock();
    struct ksock *k = g.socks[fd];
    if (k) {
        atomic_store(&tracked[fd], 0);
        g.socks[fd] = NULL;
        while (k->head) {
            struct errmsg *m = k->head;
            k->head = m->next;
            free(m);
        }
        free(k);
    }
    unlock();
}

EXPORT int close(int fd) {
    ensure_init();
    if (!inside && fd >= 0 && fd < MAX_FD && g.socks[fd]) forget(fd);
    return g.close(fd);
}

/* ---- the error queue ----------------------------------------------------------------------------------------- */

static int put_cmsg(struct msghdr *m, size_t *used, int level, int type, const void *data, size_t len) {
    size_t space = CMSG_SPACE(len);
    if (!m->msg_control || *used + space > m->msg_controllen) {
        m->msg_flags |= MSG_CTRUNC;
        return 0;
    }
    struct cmsghdr *c = (struct cmsghdr *)((uint8_t *)m->msg_control + *used);
    memset(c, 0, space);
    c->cmsg_level = level;
    c->cmsg_type = type;
    c->cmsg_len = CMSG_LEN(len);
    memcpy(CMSG_DATA(c), data, len);
    *used += space;
    return 1;
}

EXPORT ssize_t recvmsg(int fd, struct msghdr *m, int flags) {
    ensure_init();
    if (!(flags & MSG_ERRQUEUE) || !is_tracked(fd)) return g.recvmsg(fd, m, flags);
    lock();
    struct ksock *k = sock_of(fd);
    pump();
    struct errmsg *e = k ? k->head : NULL;
    if (!e) {
        unlock();
        errno = EAGAIN; /* the kernel's error queue never blocks */
        return -1;
    }
    k->head = e->next;
    if (!k->head) k->tail = NULL;
    k->queued--;
    uint32_t tsflags = k->tsflags;
    int ts_type = k->ts_new ? SO_TIMESTAMPING_NEW : SO_TIMESTAMPING_OLD;
    int rcvts = k->rcvts;
    int udp = k->udp;
    unlock();

    m->msg_flags = MSG_ERRQUEUE;
    m->msg_namelen = 0; /* no address, as the kernel gives none for these messages */
    size_t copied = 0;
    for (size_t i = 0; i < (size_t)m->msg_iovlen && copied < e->len; i++) {
        size_t n = e->len - copied < m->msg_iov[i].iov_len ? e->len - copied : m->msg_iov[i].iov_len;
        memcpy(m->msg_iov[i].iov_base, e->data + copied, n);
        copied += n;
    }
    if (copied < e->len) m->msg_flags |= MSG_TRUNC;
    size_t used = 0;
    if (!e->tstamp) {
        /* A txtime error, as ETF's comes: the skb's timestamp is its txtime, which the kernel puts before the
         * error as a software timestamp (SOF_TIMESTAMPING_SOFTWARE) and as SO_TIMESTAMP(NS) where those are on. */
        int64_t txtime = (int64_t)((uint64_t)e->ee.ee_data << 32 | e->ee.ee_info);
        if (rcvts == SO_TIMESTAMPNS_OLD || rcvts == SO_TIMESTAMPNS_NEW) {
            struct timespec t = {.tv_sec = txtime / 1000000000, .tv_nsec = txtime % 1000000000};
            put_cmsg(m, &used, SOL_SOCKET, rcvts, &t, sizeof t);
        } else if (rcvts == SO_TIMESTAMP_OLD || rcvts == SO_TIMESTAMP_NEW) {
            struct timeval t = {.tv_sec = txtime / 1000000000, .tv_usec = txtime % 1000000000 / 1000};
            put_cmsg(m, &used, SOL_SOCKET, rcvts, &t, sizeof t);
        }
        if (tsflags & SOF_TIMESTAMPING_SOFTWARE) {
            struct timespec ts[3];
            memset(ts, 0, sizeof ts);
            ts[0].tv_sec = txtime / 1000000000;
            ts[0].tv_nsec = txtime % 1000000000;
            put_cmsg(m, &used, SOL_SOCKET, ts_type, ts, sizeof ts);
        }
    } else {
        struct timespec ts[3];
        memset(ts, 0, sizeof ts);
        if ((tsflags & SOF_TIMESTAMPING_TX_SOFTWARE) && (tsflags & SOF_TIMESTAMPING_SOFTWARE)) {
            /* The kernel's TAI offset, a whole number of seconds (0 when never set), read now. */
            int64_t off = now_ns(CLOCK_TAI) - now_ns(CLOCK_REALTIME);
            off = (off + 500000000) / 1000000000 * 1000000000;
            int64_t real = e->released - off;
            ts[0].tv_sec = real / 1000000000;
            ts[0].tv_nsec = real % 1000000000;
        }
        if ((tsflags & SOF_TIMESTAMPING_TX_HARDWARE) && (tsflags & SOF_TIMESTAMPING_RAW_HARDWARE)) {
            ts[2].tv_sec = e->tai / 1000000000;
            ts[2].tv_nsec = e->tai % 1000000000;
        }
        put_cmsg(m, &used, SOL_SOCKET, ts_type, ts, sizeof ts);
    }
    /* As the kernel gives them: a packet socket the extended error alone; an IPv4 socket (IP_RECVERR) the error
     * and an offender address, empty for these origins. */
    struct {
        struct sock_extended_err ee;
        struct sockaddr_in offender;
    } hdr;
    memset(&hdr, 0, sizeof hdr);
    hdr.ee = e->ee;
    if (udp)
        put_cmsg(m, &used, SOL_IP, IP_RECVERR, &hdr, sizeof hdr);
    else
        put_cmsg(m, &used, SOL_PACKET, PACKET_TX_TIMESTAMP, &hdr.ee, sizeof hdr.ee);
    m->msg_controllen = used;
    free(e);
    return (ssize_t)copied;
}

/* poll(): a keepon socket with error-queue messages reports POLLERR (always reported, like the kernel's). While
 * waiting, the daemon's descriptor is watched too, so outcomes that arrive wake the caller. */
EXPORT int poll(struct pollfd *fds, nfds_t n, int timeout) {
    ensure_init();
    int any = 0;
    for (nfds_t i = 0; i < n && !any; i++) any = is_tracked(fds[i].fd);
    if (!any) return g.poll(fds, n, timeout);
    int64_t deadline = timeout < 0 ? -1 : now_ns(CLOCK_MONOTONIC) + (int64_t)timeout * 1000000;
    struct pollfd *all = calloc(n + 1, sizeof *all);
    if (!all) return g.poll(fds, n, timeout);
    for (;;) {
        int errs = 0;
        lock();
        pump();
        int dfd = g.daemon ? keepon_fd(g.daemon) : -1;
        for (nfds_t i = 0; i < n; i++) {
            struct ksock *k = sock_of(fds[i].fd);
            all[i] = fds[i];
            all[i].revents = 0;
            if (k && k->head) errs = 1;
        }
        unlock();
        all[n].fd = dfd;
        all[n].events = POLLIN;
        all[n].revents = 0;
        int wait = errs ? 0 : timeout < 0 ? -1 : (int)((deadline - now_ns(CLOCK_MONOTONIC)) / 1000000);
        if (wait < -1 || (timeout >= 0 && wait < 0)) wait = 0;
        int r = g.poll(all, n + 1, wait);
        if (r < 0) {
            free(all);
            return r;
        }
        int ready = 0;
        lock();
        if (all[n].revents) pump();
        for (nfds_t i = 0; i < n; i++) {
            fds[i].revents = all[i].revents;
            struct ksock *k = sock_of(fds[i].fd);
            if (k && k->head) fds[i].revents |= POLLERR;
            if (fds[i].revents) ready++;
        }
        unlock();
        if (ready || (timeout >= 0 && now_ns(CLOCK_MONOTONIC) >= deadline)) {
            free(all);
            return ready;
        }
    }
}
