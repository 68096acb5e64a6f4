/*
 * etf_sender.c — a small SO_TXTIME program written the way an ETF user writes one, for testing
 * libkeepon_txtime.so: the same binary runs on the kernel's ETF qdisc and, under LD_PRELOAD, on keepon.
 *
 *     etf-sender [--udp ADDR:PORT] IFACE BASE_NS PERIOD_NS COUNT PRIORITY OFFSET_NS... [-- late] [-- soon NS]
 *
 * One AF_PACKET SOCK_RAW socket on IFACE — or with --udp, a UDP socket bound to IFACE (SO_BINDTODEVICE) sending
 * to ADDR:PORT (IPv4, unicast or multicast) — with SO_PRIORITY, SO_TXTIME (CLOCK_TAI, SOF_TXTIME_REPORT_ERRORS)
 * and SO_TIMESTAMPING (software and hardware TX timestamps, OPT_ID, OPT_TSONLY). For each OFFSET (a flow), COUNT
 * frames with txtime BASE + OFFSET + k·PERIOD, sent with sendmsg and an SCM_TXTIME control message, in txtime
 * order. `late` adds one frame whose txtime passed 1 ms ago; `soon NS` one frame for now + NS. Then it waits
 * until 50 ms after the last txtime and reads the error queue (poll for POLLERR, recvmsg MSG_ERRQUEUE) until it
 * is empty, logging one line per event:
 *
 *     send key=K flow=F seq=S txtime=T ok|error=ERRNO_NAME
 *     errq txtime errno=ERRNO_NAME code=INVALID_PARAM|MISSED txtime=T level=packet|ip len=BYTES
 *     errq tstamp key=K sw=NS hw=NS level=packet|ip len=BYTES
 *     done sent=N refused=N
 *
 * (level: the control message the extended error came in, SOL_PACKET/PACKET_TX_TIMESTAMP or SOL_IP/IP_RECVERR;
 * len: the bytes the error-queue message carried.)
 *
 * Payload: the frame carries a keepon test header (EtherType 0x88B5, "KPON", flow, seq, txtime) so that a
 * listener can match frames to their schedule; over UDP the same bytes from "KPON" on are the datagram's payload.
 * It is just this program's payload format.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <time.h> /* before linux/errqueue.h, which uses struct timespec */
#include <inttypes.h>
#include <linux/errqueue.h>
#include <linux/if_packet.h>
#include <linux/net_tstamp.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
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

#define MAX_FRAMES 4096
#define FRAME_LEN 100

struct tx {
    int64_t txtime;
    int flow;
    uint64_t seq;
};

static int64_t tai_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_TAI, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static const char *errname(int e) {
    switch (e) {
    case EINVAL: return "EINVAL";
    case ECANCELED: return "ECANCELED";
    case ENOBUFS: return "ENOBUFS";
    case ENOMSG: return "ENOMSG";
    case ENETDOWN: return "ENETDOWN";
    case EMSGSIZE: return "EMSGSIZE";
    default: return strerror(e);
    }
}

static int by_txtime(const void *a, const void *b) {
    const struct tx *x = a, *y = b;
    return (x->txtime > y->txtime) - (x->txtime < y->txtime);
}

static void put_be(uint8_t *b, uint64_t v, int n) {
    for (int i = 0; i < n; i++) b[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
}

static int drain_errqueue(int fd) {
    int events = 0;
    for (;;) {
        uint8_t data[2048], control[512];
        struct iovec iov = {data, sizeof data};
        struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
                           .msg_controllen = sizeof control};
        ssize_t n = recvmsg(fd, &m, MSG_ERRQUEUE | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) return events;
            perror("recvmsg(MSG_ERRQUEUE)");
            return events;
        }
        events++;
        const char *level = "?";
        struct scm_timestamping ts;
        int have_ts = 0;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_TIMESTAMPING) {
                memcpy(&ts, CMSG_DATA(c), sizeof ts);
                have_ts = 1;
            } else if ((c->cmsg_level == SOL_PACKET && c->cmsg_type == PACKET_TX_TIMESTAMP) ||
                       (c->cmsg_level == SOL_IP && c->cmsg_type == IP_RECVERR)) {
                level = c->cmsg_level == SOL_IP ? "ip" : "packet";
                struct sock_extended_err ee;
                memcpy(&ee, CMSG_DATA(c), sizeof ee);
                if (ee.ee_origin == SO_EE_ORIGIN_TXTIME) {
                    int64_t t = (int64_t)((uint64_t)ee.ee_data << 32 | ee.ee_info);
                    /* The software timestamp the kernel puts before the error (the skb's tstamp: ETF's txtime). */
                    int64_t ts0 = have_ts ? (int64_t)ts.ts[0].tv_sec * 1000000000 + ts.ts[0].tv_nsec : -1;
                    printf("errq txtime errno=%s code=%s txtime=%" PRId64 " ts0=%" PRId64 " level=%s len=%zd\n",
                           errname((int)ee.ee_errno),
                           ee.ee_code == SO_EE_CODE_TXTIME_INVALID_PARAM ? "INVALID_PARAM"
                           : ee.ee_code == SO_EE_CODE_TXTIME_MISSED      ? "MISSED"
                                                                         : "other",
                           t, ts0, level, n);
                } else if (ee.ee_origin == SO_EE_ORIGIN_TIMESTAMPING) {
                    int64_t sw = have_ts ? (int64_t)ts.ts[0].tv_sec * 1000000000 + ts.ts[0].tv_nsec : -1;
                    int64_t hw = have_ts ? (int64_t)ts.ts[2].tv_sec * 1000000000 + ts.ts[2].tv_nsec : -1;
                    printf("errq tstamp key=%u sw=%" PRId64 " hw=%" PRId64 " level=%s len=%zd\n", ee.ee_data, sw, hw,
                           level, n);
                } else {
                    printf("errq other origin=%u errno=%s\n", ee.ee_origin, errname((int)ee.ee_errno));
                }
            }
        }
    }
}

int main(int argc, char **argv) {
    struct sockaddr_in udp = {.sin_family = AF_INET};
    int use_udp = 0;
    if (argc > 2 && strcmp(argv[1], "--udp") == 0) {
        char addr[64];
        snprintf(addr, sizeof addr, "%s", argv[2]);
        char *colon = strrchr(addr, ':');
        if (!colon || (*colon = 0, inet_pton(AF_INET, addr, &udp.sin_addr) != 1)) {
            fprintf(stderr, "--udp %s: expected IPV4:PORT\n", argv[2]);
            return 2;
        }
        udp.sin_port = htons((uint16_t)atoi(colon + 1));
        use_udp = 1;
        argv += 2;
        argc -= 2;
    }
    if (argc < 7) {
        fprintf(stderr,
                "usage: %s [--udp ADDR:PORT] IFACE BASE_NS PERIOD_NS COUNT PRIORITY OFFSET_NS... [-- late] [-- soon "
                "NS]\n",
                argv[0]);
        return 2;
    }
    const char *iface = argv[1];
    int64_t base = strtoll(argv[2], NULL, 10), period = strtoll(argv[3], NULL, 10);
    int count = atoi(argv[4]), prio = atoi(argv[5]);
    static struct tx txs[MAX_FRAMES];
    int n = 0, late = 0;
    int64_t soon = -1;
    int flow = 0;
    for (int i = 6; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0 && i + 1 < argc && strcmp(argv[i + 1], "late") == 0) {
            late = 1;
            i++;
        } else if (strcmp(argv[i], "--") == 0 && i + 2 < argc && strcmp(argv[i + 1], "soon") == 0) {
            soon = strtoll(argv[i + 2], NULL, 10);
            i += 2;
        } else {
            int64_t off = strtoll(argv[i], NULL, 10);
            for (int k = 0; k < count && n < MAX_FRAMES; k++) txs[n++] = (struct tx){base + off + k * period, flow, (uint64_t)k};
            flow++;
        }
    }
    qsort(txs, (size_t)n, sizeof txs[0], by_txtime);

    int fd = use_udp ? socket(AF_INET, SOCK_DGRAM, 0) : socket(AF_PACKET, SOCK_RAW, 0);
    if (fd < 0) {
        perror("socket");
        return 1;
    }
    int ifindex = (int)if_nametoindex(iface);
    struct sockaddr_ll a = {.sll_family = AF_PACKET, .sll_ifindex = ifindex, .sll_protocol = htons(0x88b5)};
    if (use_udp ? setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, iface, (socklen_t)strlen(iface)) != 0
                : ifindex == 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        perror(use_udp ? "SO_BINDTODEVICE" : "bind");
        return 1;
    }
    struct sock_txtime st = {.clockid = CLOCK_TAI, .flags = SOF_TXTIME_REPORT_ERRORS};
    int tsflags = SOF_TIMESTAMPING_TX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE | SOF_TIMESTAMPING_TX_HARDWARE |
                  SOF_TIMESTAMPING_RAW_HARDWARE | SOF_TIMESTAMPING_OPT_ID | SOF_TIMESTAMPING_OPT_TSONLY;
    if (setsockopt(fd, SOL_SOCKET, SO_PRIORITY, &prio, sizeof prio) != 0 ||
        setsockopt(fd, SOL_SOCKET, SO_TXTIME, &st, sizeof st) != 0 ||
        setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPING, &tsflags, sizeof tsflags) != 0) {
        perror("setsockopt");
        return 1;
    }

    uint8_t frame[FRAME_LEN];
    uint32_t key = 0;
    int sent = 0, refused = 0;
    int64_t last = 0;
    int extra = late + (soon >= 0);
    for (int i = 0; i < n + extra; i++) {
        struct tx t;
        if (i < n) {
            t = txs[i];
        } else if (late) {
            t = (struct tx){tai_now() - 1000000, 99, 0};
            late = 0;
        } else {
            t = (struct tx){tai_now() + soon, 98, 0};
        }
        memset(frame, 0, sizeof frame);
        const uint8_t head[14] = {0x02, 0x6b, 0x70, 0, 0, 0x02, 0x02, 0x6b, 0x70, 0, 0, 0x01, 0x88, 0xb5};
        memcpy(frame, head, sizeof head);
        memcpy(frame + 14, "KPON", 4);
        frame[18] = 1;
        put_be(frame + 20, (uint64_t)t.flow, 2);
        put_be(frame + 22, t.seq, 8);
        put_be(frame + 30, (uint64_t)t.txtime, 8);

        uint8_t control[CMSG_SPACE(sizeof(uint64_t))];
        memset(control, 0, sizeof control);
        /* Over UDP the payload is the test header from "KPON" on, padded so that the frame is FRAME_LEN bytes. */
        struct iovec iov = {use_udp ? frame + 14 : frame, use_udp ? FRAME_LEN - 14 - 20 - 8 : sizeof frame};
        struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
                           .msg_controllen = sizeof control};
        if (use_udp) {
            m.msg_name = &udp;
            m.msg_namelen = sizeof udp;
        }
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_TXTIME;
        c->cmsg_len = CMSG_LEN(sizeof(uint64_t));
        uint64_t tx = (uint64_t)t.txtime;
        memcpy(CMSG_DATA(c), &tx, sizeof tx);
        ssize_t r = sendmsg(fd, &m, 0);
        int err = errno;
        /* When the send returned (CLOCK_TAI): a txtime before it may rightly have passed during the call. */
        int64_t done = tai_now();
        if (r < 0) {
            printf("send key=%u flow=%d seq=%" PRIu64 " txtime=%" PRId64 " done=%" PRId64 " error=%s\n", key, t.flow,
                   t.seq, t.txtime, done, errname(err));
            refused++;
        } else {
            printf("send key=%u flow=%d seq=%" PRIu64 " txtime=%" PRId64 " done=%" PRId64 " ok\n", key, t.flow, t.seq,
                   t.txtime, done);
            sent++;
        }
        key++;
        if (t.txtime > last) last = t.txtime;
    }
    fflush(stdout);

    /* Wait until 50 ms after the last txtime, reading the error queue as it fills. */
    for (;;) {
        int64_t left = last + 50000000 - tai_now();
        if (left <= 0) break;
        struct pollfd p = {.fd = fd, .events = 0};
        int r = poll(&p, 1, (int)(left / 1000000) + 1);
        if (r > 0 && (p.revents & POLLERR)) drain_errqueue(fd);
    }
    drain_errqueue(fd);
    printf("done sent=%d refused=%d\n", sent, refused);
    close(fd);
    return 0;
}
