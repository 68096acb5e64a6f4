/*
 * preload_check.c — edge cases of libkeepon_txtime.so, run by crates/keepon/tests/txtime_preload.rs under
 * LD_PRELOAD with KEEPON_IFACE=lo, KEEPON_PRIO_CLASS="3=tc-0", against a daemon whose tc-0 owns ring slot 0 of a
 * 32-slot ring of 100 µs slots, in a network namespace that also has an interface `d0` (one end of a veth pair).
 *
 *     preload-check BASE_NS
 *
 * BASE_NS is a ring-slot-0 start at least 100 ms ahead. Checks (exit status 0 when all pass):
 *   A  sendmmsg of 3 frames on a keepon socket returns 3; sendto without SCM_TXTIME, write and send fail ENOBUFS
 *      with an INVALID_PARAM message each (txtime 0); the 3 frames come back as TX timestamps (hardware slot)
 *      with their payload (no OPT_TSONLY) and ee_data 0 (no OPT_ID); poll() reports POLLERR once they arrive;
 *      a small buffer gives MSG_TRUNC, a small control buffer MSG_CTRUNC.
 *   B  clockid CLOCK_MONOTONIC and C  SOF_TXTIME_DEADLINE_MODE: send fails ENOBUFS, INVALID_PARAM queued.
 *   D  without SOF_TXTIME_REPORT_ERRORS and SO_TIMESTAMPING: a frame in a slot tc-0 does not own and a frame in
 *      its own slot are accepted and leave nothing on the error queue.
 *   E  an AF_PACKET socket with SO_TXTIME bound to d0, F  a UDP socket with SO_TXTIME whose datagram is not routed
 *      through KEEPON_IFACE (to 127.0.0.1: the local table's route), G  a socket closed and its descriptor reused
 *      without SO_TXTIME: all go to the kernel (the caller checks that the daemon counted exactly the 7 frames of
 *      A, D, H and I).
 *   I  UDP sockets not bound to a device, IP_MULTICAST_IF set by interface index: to lo (KEEPON_IFACE), a datagram
 *      to 239.1.2.3 is keepon's, and its TX timestamp (SOL_IP) carries the frame keepon built — group MAC, IPv4
 *      and UDP headers with valid checksums; to d0, the kernel's.
 *   J  a UDP socket over IPv6 that sets SO_TXTIME: not taken over, and the library says so on stderr (the caller
 *      checks the line).
 *   H  an AF_PACKET SOCK_DGRAM socket: sendto with a destination MAC and EtherType hands keepon the frame with the
 *      Ethernet header the kernel would build (lo's MAC as source), returns the data length, and its TX timestamp
 *      carries that frame.
 * Prints `tstamp TXTIME HW` for each A frame for the caller's timing check.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <time.h> /* before linux/errqueue.h */
#include <arpa/inet.h>
#include <inttypes.h>
#include <linux/errqueue.h>
#include <linux/if_packet.h>
#include <linux/net_tstamp.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef SO_TXTIME
#define SO_TXTIME 61
#define SCM_TXTIME SO_TXTIME
#endif
#ifndef SO_EE_ORIGIN_TXTIME
#define SO_EE_ORIGIN_TXTIME 6
#define SO_EE_CODE_TXTIME_INVALID_PARAM 1
#define SO_EE_CODE_TXTIME_MISSED 2
#endif

#define SLOT ((int64_t)100000)
#define CYCLE (32 * SLOT)
#define LEN 100

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

static int64_t tai_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_TAI, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_until_tai(int64_t t) {
    int64_t left = t - tai_now();
    if (left > 0) {
        struct timespec d = {left / 1000000000, left % 1000000000};
        nanosleep(&d, NULL);
    }
}

static int packet_socket(const char *ifname, int prio, clockid_t clock, int txflags, int tsflags) {
    int fd = socket(AF_PACKET, SOCK_RAW, 0);
    struct sockaddr_ll a = {.sll_family = AF_PACKET, .sll_ifindex = (int)if_nametoindex(ifname),
                            .sll_protocol = htons(0x88b5)};
    struct sock_txtime st = {.clockid = clock, .flags = (uint32_t)txflags};
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        setsockopt(fd, SOL_SOCKET, SO_PRIORITY, &prio, sizeof prio) != 0 ||
        setsockopt(fd, SOL_SOCKET, SO_TXTIME, &st, sizeof st) != 0 ||
        (tsflags && setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPING, &tsflags, sizeof tsflags) != 0)) {
        perror(ifname);
        exit(1);
    }
    return fd;
}

static void frame(uint8_t *f, uint64_t seq) {
    const uint8_t head[14] = {0x02, 0x6b, 0x70, 0, 0, 0x02, 0x02, 0x6b, 0x70, 0, 0, 0x01, 0x88, 0xb5};
    memset(f, 0, LEN);
    memcpy(f, head, sizeof head);
    memcpy(f + 14, &seq, sizeof seq);
}

/* A message with one frame and SCM_TXTIME txtime, in caller-provided storage. */
struct txmsg {
    struct msghdr m;
    struct iovec iov;
    uint8_t data[LEN];
    uint8_t control[CMSG_SPACE(sizeof(uint64_t))];
};

static void txmsg(struct txmsg *t, uint64_t seq, int64_t txtime) {
    memset(t, 0, sizeof *t);
    frame(t->data, seq);
    t->iov = (struct iovec){t->data, LEN};
    t->m.msg_iov = &t->iov;
    t->m.msg_iovlen = 1;
    t->m.msg_control = t->control;
    t->m.msg_controllen = sizeof t->control;
    struct cmsghdr *c = CMSG_FIRSTHDR(&t->m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_TXTIME;
    c->cmsg_len = CMSG_LEN(sizeof(uint64_t));
    uint64_t v = (uint64_t)txtime;
    memcpy(CMSG_DATA(c), &v, sizeof v);
}

struct errq {
    ssize_t n;
    int flags;
    int have_ee, have_ts;
    struct sock_extended_err ee;
    struct scm_timestamping ts;
    uint8_t data[2048];
};

static int read_errq(int fd, struct errq *e, size_t buflen, size_t ctrllen) {
    uint8_t control[512];
    memset(e, 0, sizeof *e);
    struct iovec iov = {e->data, buflen};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = ctrllen};
    e->n = recvmsg(fd, &m, MSG_ERRQUEUE);
    if (e->n < 0) return -1;
    e->flags = m.msg_flags;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_TIMESTAMPING) {
            memcpy(&e->ts, CMSG_DATA(c), sizeof e->ts);
            e->have_ts = 1;
        } else if ((c->cmsg_level == SOL_PACKET && c->cmsg_type == PACKET_TX_TIMESTAMP) ||
                   (c->cmsg_level == SOL_IP && c->cmsg_type == IP_RECVERR)) {
            memcpy(&e->ee, CMSG_DATA(c), sizeof e->ee);
            e->have_ee = c->cmsg_level == SOL_IP ? 2 : 1;
        }
    }
    return 0;
}

static int is_invalid(const struct errq *e, int64_t txtime) {
    return e->have_ee && e->ee.ee_origin == SO_EE_ORIGIN_TXTIME && e->ee.ee_errno == EINVAL &&
           e->ee.ee_code == SO_EE_CODE_TXTIME_INVALID_PARAM &&
           (int64_t)((uint64_t)e->ee.ee_data << 32 | e->ee.ee_info) == txtime;
}

static void refused_at_send(const char *what, int fd, int64_t txtime) {
    struct txmsg t;
    txmsg(&t, 500, txtime);
    errno = 0;
    CHECK(sendmsg(fd, &t.m, 0) == -1 && errno == ENOBUFS, "%s: sendmsg errno %d", what, errno);
    struct errq e;
    CHECK(read_errq(fd, &e, sizeof e.data, 512) == 0 && is_invalid(&e, txtime), "%s: INVALID_PARAM queued", what);
    CHECK(read_errq(fd, &e, sizeof e.data, 512) == -1 && errno == EAGAIN, "%s: then empty", what);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s BASE_NS\n", argv[0]);
        return 2;
    }
    int64_t base = strtoll(argv[1], NULL, 10);
    int tsflags = SOF_TIMESTAMPING_TX_HARDWARE | SOF_TIMESTAMPING_RAW_HARDWARE;

    /* A */
    int a = packet_socket("lo", 3, CLOCK_TAI, SOF_TXTIME_REPORT_ERRORS, tsflags);
    static struct txmsg t[3];
    struct mmsghdr mm[3];
    for (int k = 0; k < 3; k++) {
        txmsg(&t[k], (uint64_t)k, base + k * CYCLE);
        mm[k] = (struct mmsghdr){.msg_hdr = t[k].m};
    }
    CHECK(sendmmsg(a, mm, 3, 0) == 3, "sendmmsg: %s", strerror(errno));
    CHECK(mm[0].msg_len == LEN && mm[2].msg_len == LEN, "msg_len %u", mm[0].msg_len);
    uint8_t f[LEN];
    frame(f, 9);
    struct sockaddr_ll to = {.sll_family = AF_PACKET, .sll_ifindex = (int)if_nametoindex("lo")};
    errno = 0;
    CHECK(sendto(a, f, LEN, 0, (struct sockaddr *)&to, sizeof to) == -1 && errno == ENOBUFS, "sendto: %d", errno);
    errno = 0;
    CHECK(write(a, f, LEN) == -1 && errno == ENOBUFS, "write: %d", errno);
    errno = 0;
    CHECK(send(a, f, LEN, 0) == -1 && errno == ENOBUFS, "send: %d", errno);
    struct errq e;
    for (int i = 0; i < 3; i++)
        CHECK(read_errq(a, &e, sizeof e.data, 512) == 0 && is_invalid(&e, 0) && e.n == LEN &&
                  (e.flags & MSG_ERRQUEUE) && memcmp(e.data, f, LEN) == 0,
              "txtime-0 error %d", i);
    CHECK(read_errq(a, &e, sizeof e.data, 512) == -1 && errno == EAGAIN, "nothing else yet");
    /* poll: nothing before the first slot; POLLERR once the outcomes arrive. */
    struct pollfd p = {.fd = a, .events = 0};
    CHECK(poll(&p, 1, 0) == 0, "poll before any outcome: revents %#x", p.revents);
    int64_t wait_ms = (base + 2 * CYCLE - tai_now()) / 1000000 + 1000;
    int r = poll(&p, 1, (int)wait_ms);
    CHECK(r == 1 && (p.revents & POLLERR), "poll: %d revents %#x", r, p.revents);
    sleep_until_tai(base + 2 * CYCLE + 50000000);
    /* First stamp with a 10-byte buffer and a tiny control buffer: truncated, both ways. */
    CHECK(read_errq(a, &e, 10, CMSG_SPACE(sizeof(struct scm_timestamping))) == 0 && e.n == 10 &&
              (e.flags & MSG_TRUNC) && (e.flags & MSG_CTRUNC) && e.have_ts && !e.have_ee,
          "truncated: n=%zd flags %#x", e.n, e.flags);
    int64_t hw0 = (int64_t)e.ts.ts[2].tv_sec * 1000000000 + e.ts.ts[2].tv_nsec;
    printf("tstamp %" PRId64 " %" PRId64 "\n", base, hw0);
    for (int k = 1; k < 3; k++) {
        CHECK(read_errq(a, &e, sizeof e.data, 512) == 0 && e.have_ts && e.have_ee &&
                  e.ee.ee_origin == SO_EE_ORIGIN_TIMESTAMPING && e.ee.ee_errno == ENOMSG &&
                  e.ee.ee_info == SCM_TSTAMP_SND && e.ee.ee_data == 0 && e.n == LEN &&
                  memcmp(e.data, t[k].data, LEN) == 0 && e.ts.ts[0].tv_sec == 0,
              "stamp %d", k);
        printf("tstamp %" PRId64 " %" PRId64 "\n", base + k * CYCLE,
               (int64_t)e.ts.ts[2].tv_sec * 1000000000 + e.ts.ts[2].tv_nsec);
    }
    CHECK(read_errq(a, &e, sizeof e.data, 512) == -1 && errno == EAGAIN, "A: then empty");

    /* B, C */
    int b = packet_socket("lo", 3, CLOCK_MONOTONIC, SOF_TXTIME_REPORT_ERRORS, 0);
    refused_at_send("clockid CLOCK_MONOTONIC", b, tai_now() + 1000000000);
    int c = packet_socket("lo", 3, CLOCK_TAI, SOF_TXTIME_REPORT_ERRORS | SOF_TXTIME_DEADLINE_MODE, 0);
    refused_at_send("deadline mode", c, tai_now() + 1000000000);

    /* D: errors not requested, timestamps not requested. */
    int d = packet_socket("lo", 3, CLOCK_TAI, 0, 0);
    int64_t next = base + ((tai_now() - base) / CYCLE + 20) * CYCLE;
    struct txmsg u;
    txmsg(&u, 600, next + 5 * SLOT); /* ring slot 5: not tc-0's */
    CHECK(sendmsg(d, &u.m, 0) == LEN, "D not-owned accepted");
    txmsg(&u, 601, next + CYCLE);
    CHECK(sendmsg(d, &u.m, 0) == LEN, "D owned accepted");
    sleep_until_tai(next + CYCLE + 50000000);
    p = (struct pollfd){.fd = d, .events = 0};
    CHECK(poll(&p, 1, 0) == 0, "D: no POLLERR");
    CHECK(read_errq(d, &e, sizeof e.data, 512) == -1 && errno == EAGAIN, "D: error queue stays empty");

    /* E: another interface. */
    int x = packet_socket("d0", 3, CLOCK_TAI, SOF_TXTIME_REPORT_ERRORS, tsflags);
    txmsg(&u, 700, tai_now() + 1000000);
    CHECK(sendmsg(x, &u.m, 0) == LEN, "E: d0 goes to the kernel: %s", strerror(errno));
    /* F: UDP. */
    int y = socket(AF_INET, SOCK_DGRAM, 0);
    struct sock_txtime st = {.clockid = CLOCK_TAI, .flags = SOF_TXTIME_REPORT_ERRORS};
    CHECK(setsockopt(y, SOL_SOCKET, SO_TXTIME, &st, sizeof st) == 0, "UDP SO_TXTIME");
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(9), .sin_addr.s_addr = htonl(0x7f000001)};
    txmsg(&u, 800, tai_now() + 1000000);
    u.m.msg_name = &sin;
    u.m.msg_namelen = sizeof sin;
    CHECK(sendmsg(y, &u.m, 0) == LEN, "F: UDP goes to the kernel: %s", strerror(errno));
    /* H: SOCK_DGRAM, the header built from the address. */
    int h = socket(AF_PACKET, SOCK_DGRAM, 0);
    struct sockaddr_ll hl = {.sll_family = AF_PACKET, .sll_ifindex = (int)if_nametoindex("lo"),
                             .sll_protocol = htons(0x88b5), .sll_halen = 6,
                             .sll_addr = {0x02, 0x6b, 0x70, 0, 0, 0x07}};
    int prio = 3;
    CHECK(h >= 0 && bind(h, (struct sockaddr *)&hl, sizeof hl) == 0 &&
              setsockopt(h, SOL_SOCKET, SO_PRIORITY, &prio, sizeof prio) == 0 &&
              setsockopt(h, SOL_SOCKET, SO_TXTIME, &st, sizeof st) == 0 &&
              setsockopt(h, SOL_SOCKET, SO_TIMESTAMPING, &tsflags, sizeof tsflags) == 0,
          "H: SOCK_DGRAM socket: %s", strerror(errno));
    int64_t hnext = base + ((tai_now() - base) / CYCLE + 20) * CYCLE;
    txmsg(&u, 1000, hnext);
    u.m.msg_name = &hl;
    u.m.msg_namelen = sizeof hl;
    CHECK(sendmsg(h, &u.m, 0) == LEN, "H: the data length: %s", strerror(errno));
    sleep_until_tai(hnext + 50000000);
    const uint8_t hhead[14] = {0x02, 0x6b, 0x70, 0, 0, 0x07, 0, 0, 0, 0, 0, 0, 0x88, 0xb5};
    CHECK(read_errq(h, &e, sizeof e.data, 512) == 0 && e.have_ts && e.have_ee &&
              e.ee.ee_origin == SO_EE_ORIGIN_TIMESTAMPING && e.n == 14 + LEN && memcmp(e.data, hhead, 14) == 0 &&
              memcmp(e.data + 14, u.data, LEN) == 0,
          "H: the TX timestamp carries the frame with its built header: n=%zd", e.n);
    close(h);
    /* I: UDP with IP_MULTICAST_IF by index. */
    int ilo = socket(AF_INET, SOCK_DGRAM, 0), id0 = socket(AF_INET, SOCK_DGRAM, 0);
    struct ip_mreqn on_lo = {.imr_ifindex = (int)if_nametoindex("lo")}, on_d0 = {.imr_ifindex = (int)if_nametoindex("d0")};
    CHECK(setsockopt(ilo, IPPROTO_IP, IP_MULTICAST_IF, &on_lo, sizeof on_lo) == 0 &&
              setsockopt(ilo, SOL_SOCKET, SO_PRIORITY, &prio, sizeof prio) == 0 &&
              setsockopt(ilo, SOL_SOCKET, SO_TXTIME, &st, sizeof st) == 0 &&
              setsockopt(ilo, SOL_SOCKET, SO_TIMESTAMPING, &tsflags, sizeof tsflags) == 0 &&
              setsockopt(id0, IPPROTO_IP, IP_MULTICAST_IF, &on_d0, sizeof on_d0) == 0 &&
              setsockopt(id0, SOL_SOCKET, SO_TXTIME, &st, sizeof st) == 0,
          "I: UDP sockets: %s", strerror(errno));
    struct sockaddr_in group = {.sin_family = AF_INET, .sin_port = htons(5000), .sin_addr.s_addr = htonl(0xEF010203)};
    int64_t inext = base + ((tai_now() - base) / CYCLE + 20) * CYCLE;
    txmsg(&u, 1100, inext);
    u.m.msg_name = &group;
    u.m.msg_namelen = sizeof group;
    CHECK(sendmsg(ilo, &u.m, 0) == LEN, "I: lo's datagram taken: %s", strerror(errno));
    CHECK(sendmsg(id0, &u.m, 0) == LEN, "I: d0's datagram to the kernel: %s", strerror(errno));
    sleep_until_tai(inext + 50000000);
    CHECK(read_errq(ilo, &e, sizeof e.data, 512) == 0 && e.have_ts && e.have_ee == 2 &&
              e.ee.ee_origin == SO_EE_ORIGIN_TIMESTAMPING && e.n == 42 + LEN,
          "I: a TX timestamp under SOL_IP with the frame: n=%zd level %d", e.n, e.have_ee);
    const uint8_t *ip = e.data + 14, *udp = ip + 20;
    const uint8_t gmac[6] = {0x01, 0x00, 0x5e, 0x01, 0x02, 0x03};
    uint32_t sum = 0;
    for (int i = 0; i < 20; i += 2) sum += (uint32_t)ip[i] << 8 | ip[i + 1];
    while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
    uint32_t us = ((uint32_t)ip[12] << 8 | ip[13]) + ((uint32_t)ip[14] << 8 | ip[15]) +
                  ((uint32_t)ip[16] << 8 | ip[17]) + ((uint32_t)ip[18] << 8 | ip[19]) + 17 + 8 + LEN;
    for (int i = 0; i < 8 + LEN; i += 2) us += (uint32_t)udp[i] << 8 | udp[i + 1];
    while (us >> 16) us = (us & 0xFFFF) + (us >> 16);
    CHECK(memcmp(e.data, gmac, 6) == 0 && e.data[12] == 0x08 && e.data[13] == 0 && ip[0] == 0x45 && ip[9] == 17 &&
              ip[8] == 1 /* multicast TTL */ && memcmp(ip + 16, &group.sin_addr, 4) == 0 && sum == 0xFFFF &&
              memcmp(udp + 2, &group.sin_port, 2) == 0 && us == 0xFFFF && memcmp(udp + 8, u.data, LEN) == 0,
          "I: the frame keepon built (ip checksum %#x, udp %#x)", sum, us);
    close(ilo);
    close(id0);
    /* J: IPv6 UDP (where the kernel has IPv6). */
    int v6 = socket(AF_INET6, SOCK_DGRAM, 0);
    if (v6 >= 0) {
        CHECK(setsockopt(v6, SOL_SOCKET, SO_TXTIME, &st, sizeof st) == 0, "J: SO_TXTIME: %s", strerror(errno));
        close(v6);
    } else {
        fprintf(stderr, "J: no IPv6 here\n");
    }
    /* G: close a keepon socket; a new socket on the same descriptor without SO_TXTIME is the kernel's. */
    close(d);
    int z = socket(AF_PACKET, SOCK_RAW, 0);
    CHECK(z == d, "descriptor reused (%d vs %d)", z, d);
    struct sockaddr_ll zl = {.sll_family = AF_PACKET, .sll_ifindex = (int)if_nametoindex("lo"),
                             .sll_protocol = htons(0x88b5)};
    CHECK(bind(z, (struct sockaddr *)&zl, sizeof zl) == 0, "bind");
    frame(f, 900);
    CHECK(write(z, f, LEN) == LEN, "G: write goes to the kernel: %s", strerror(errno));

    close(a);
    close(b);
    close(c);
    close(x);
    close(y);
    close(z);
    if (failures) {
        fprintf(stderr, "%d checks failed\n", failures);
        return 1;
    }
    fprintf(stderr, "all checks passed\n");
    return 0;
}
