/*
 * udp4.c — the Ethernet/IPv4/UDP frame the kernel would build for a UDP datagram (reference: udp4.h).
 */
#define _GNU_SOURCE
#include "udp4.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

/* The interface's IPv4 address on the subnet of `dst` (host order), else its first one; 0 if it has none. *mask
 * gets that address's netmask. */
static uint32_t iface_addr(const struct udp4_link *l, uint32_t dst, uint32_t *mask) {
    struct ifaddrs *all;
    if (getifaddrs(&all) != 0) return 0;
    uint32_t first = 0, first_mask = 0, best = 0;
    for (struct ifaddrs *a = all; a; a = a->ifa_next) {
        if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET || strcmp(a->ifa_name, l->ifname) != 0) continue;
        uint32_t ip = ntohl(((struct sockaddr_in *)a->ifa_addr)->sin_addr.s_addr);
        uint32_t m = a->ifa_netmask ? ntohl(((struct sockaddr_in *)a->ifa_netmask)->sin_addr.s_addr) : 0xFFFFFFFF;
        if (!first) {
            first = ip;
            first_mask = m;
        }
        if (!best && (ip & m) == (dst & m)) {
            best = ip;
            *mask = m;
        }
    }
    freeifaddrs(all);
    if (!best) *mask = first_mask;
    return best ? best : first;
}

/* The kernel's IPv4 route to `dst` (host order) in the main table (/proc/net/route: the longest prefix, then the
 * lowest metric): 1 if it goes through the interface, with *gw its gateway (0 for an on-link route); 0 if it goes
 * through another interface or there is none. */
static int iface_route(const struct udp4_link *l, uint32_t dst, uint32_t *gw) {
    FILE *f = fopen("/proc/net/route", "re");
    if (!f) return 0;
    char line[256], dev[IF_NAMESIZE + 1];
    unsigned dest, gate, flags, metric, mask;
    int best = -1, ours = 0;
    unsigned best_metric = 0;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "%16s %x %x %x %*d %*d %u %x", dev, &dest, &gate, &flags, &metric, &mask) != 6) continue;
        if (!(flags & 0x1)) continue; /* RTF_UP */
        /* The file holds addresses in network byte order, printed as native integers. */
        uint32_t d = ntohl(dest), m = ntohl(mask);
        int len = __builtin_popcount(m);
        if ((dst & m) != d || len < best || (len == best && metric >= best_metric)) continue;
        best = len;
        best_metric = metric;
        ours = strcmp(dev, l->ifname) == 0;
        *gw = (flags & 0x2) /* RTF_GATEWAY */ ? ntohl(gate) : 0;
    }
    fclose(f);
    return best >= 0 && ours;
}

/* The neighbour table's complete entry for `ip` (host order) on the interface (/proc/net/arp). */
static int neighbour(const struct udp4_link *l, uint32_t ip, uint8_t mac[6]) {
    FILE *f = fopen("/proc/net/arp", "re");
    if (!f) return 0;
    char line[256], addr[64], hw[64], dev[IF_NAMESIZE + 1];
    unsigned type, flags;
    int ok = 0;
    while (!ok && fgets(line, sizeof line, f)) {
        struct in_addr a;
        unsigned m[6];
        if (sscanf(line, "%63s 0x%x 0x%x %63s %*s %16s", addr, &type, &flags, hw, dev) != 5) continue;
        if (strcmp(dev, l->ifname) != 0 || !(flags & 0x2) /* ATF_COM */ || inet_pton(AF_INET, addr, &a) != 1 ||
            ntohl(a.s_addr) != ip)
            continue;
        if (sscanf(hw, "%x:%x:%x:%x:%x:%x", &m[0], &m[1], &m[2], &m[3], &m[4], &m[5]) != 6) continue;
        for (int i = 0; i < 6; i++) mac[i] = (uint8_t)m[i];
        ok = 1;
    }
    fclose(f);
    return ok;
}

static uint32_t sum16(const uint8_t *b, size_t n, uint32_t s) {
    for (size_t i = 0; i + 1 < n; i += 2) s += (uint32_t)b[i] << 8 | b[i + 1];
    if (n & 1) s += (uint32_t)b[n - 1] << 8;
    return s;
}

static uint16_t fold(uint32_t s) {
    while (s >> 16) s = (s & 0xFFFF) + (s >> 16);
    return (uint16_t)~s;
}

static void put16(uint8_t *b, uint16_t v) {
    b[0] = (uint8_t)(v >> 8);
    b[1] = (uint8_t)v;
}

/* Does a datagram of socket `fd` to `dst` (host order) leave through the interface? Like the kernel's choice: the
 * device the
 * socket is bound to (SO_BINDTODEVICE) decides; otherwise, for multicast, the interface set with IP_MULTICAST_IF;
 * otherwise the routing table (a route through the interface). */
int udp4_goes_out(const struct udp4_link *l, int fd, uint32_t dst, int mc_ifindex) {
    char dev[IF_NAMESIZE + 1] = {0};
    socklen_t dl = sizeof dev - 1;
    if (getsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, dev, &dl) == 0 && dl > 0 && dev[0])
        return strcmp(dev, l->ifname) == 0;
    if ((dst >> 28) == 0xE && mc_ifindex) return mc_ifindex == l->ifindex;
    if ((dst >> 28) == 0xE) {
        /* The address form of IP_MULTICAST_IF, as the kernel reports it. */
        struct in_addr mc;
        socklen_t ml = sizeof mc;
        if (getsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &mc, &ml) == 0 && ml == sizeof mc && mc.s_addr) {
            uint32_t mask, a = ntohl(mc.s_addr);
            return iface_addr(l, a, &mask) == a;
        }
    }
    uint32_t gw;
    return iface_route(l, dst, &gw);
}

/* The Ethernet/IPv4/UDP headers the kernel would put before a datagram from socket `fd` to `to` through the
 * interface, all but the lengths, the identification and the checksums. 0, or -errno (EHOSTUNREACH: no
 * neighbour entry for the next hop — keepon does not resolve addresses; EACCES: broadcast without SO_BROADCAST). */
int udp4_head(const struct udp4_link *l, int fd, const struct sockaddr_in *to, uint8_t head[UDP4_HEAD]) {
    uint32_t dst = ntohl(to->sin_addr.s_addr);
    struct sockaddr_in me;
    socklen_t ml = sizeof me;
    memset(&me, 0, sizeof me);
    getsockname(fd, (struct sockaddr *)&me, &ml);
    if (me.sin_port == 0) { /* not bound yet: the kernel binds an unbound socket at its first send */
        struct sockaddr_in any = {.sin_family = AF_INET};
        if (bind(fd, (struct sockaddr *)&any, sizeof any) != 0) return -errno;
        ml = sizeof me;
        getsockname(fd, (struct sockaddr *)&me, &ml);
    }
    uint32_t mask = 0, src = ntohl(me.sin_addr.s_addr);
    uint32_t ifa = iface_addr(l, dst, &mask);
    if (!src) src = ifa;
    uint8_t dmac[6];
    int multicast = (dst >> 28) == 0xE;
    if (multicast) {
        const uint8_t m[6] = {0x01, 0x00, 0x5e, (uint8_t)(dst >> 16 & 0x7F), (uint8_t)(dst >> 8), (uint8_t)dst};
        memcpy(dmac, m, 6);
    } else if (dst == 0xFFFFFFFF ||
               (mask && mask != 0xFFFFFFFF && (dst & ~mask) == ~mask && (dst & mask) == (ifa & mask))) {
        int on = 0; /* broadcast needs SO_BROADCAST, as in the kernel */
        socklen_t ol = sizeof on;
        if (getsockopt(fd, SOL_SOCKET, SO_BROADCAST, &on, &ol) != 0 || !on) return -EACCES;
        memset(dmac, 0xFF, 6);
    } else {
        /* The next hop: the route's gateway; the destination itself on the interface's subnet, or when the socket
         * is bound to the interface and no route says otherwise (as the kernel sends it on-link then). */
        uint32_t gw = 0;
        if (!iface_route(l, dst, &gw)) gw = 0;
        if (!neighbour(l, gw ? gw : dst, dmac)) return -EHOSTUNREACH;
    }
    int ttl = multicast ? 1 : 64, tos = 0;
    socklen_t il = sizeof ttl;
    if (multicast) {
        unsigned char mttl = 1;
        socklen_t cl = sizeof mttl;
        if (getsockopt(fd, IPPROTO_IP, IP_MULTICAST_TTL, &mttl, &cl) == 0) ttl = mttl;
    } else {
        getsockopt(fd, IPPROTO_IP, IP_TTL, &ttl, &il);
    }
    il = sizeof tos;
    getsockopt(fd, IPPROTO_IP, IP_TOS, &tos, &il);

    uint8_t *e = head, *ip = head + 14, *udp = ip + 20;
    memset(head, 0, UDP4_HEAD);
    memcpy(e, dmac, 6);
    memcpy(e + 6, l->mac, 6);
    put16(e + 12, 0x0800);
    ip[0] = 0x45;
    ip[1] = (uint8_t)tos;
    put16(ip + 6, 0x4000); /* DF: keepon sends whole datagrams, as the kernel does below the path MTU */
    ip[8] = (uint8_t)ttl;
    ip[9] = IPPROTO_UDP;
    uint32_t be_src = htonl(src), be_dst = htonl(dst);
    memcpy(ip + 12, &be_src, 4);
    memcpy(ip + 16, &be_dst, 4);
    memcpy(udp, &me.sin_port, 2);
    memcpy(udp + 2, &to->sin_port, 2);
    return 0;
}

/* The frame around the `plen` bytes of payload at frame + UDP4_HEAD: `head` (from udp4_head) with the lengths, the
 * identification `id` and the checksums filled in. Returns its length, or -EMSGSIZE over the interface's MTU
 * (keepon does not fragment). */
ssize_t udp4_frame(const struct udp4_link *l, const uint8_t head[UDP4_HEAD], uint16_t id, size_t plen, uint8_t *frame) {
    if (28 + plen > (size_t)l->mtu) return -EMSGSIZE;
    memcpy(frame, head, UDP4_HEAD);
    uint8_t *ip = frame + 14, *udp = ip + 20;
    size_t total = 28 + plen;
    put16(ip + 2, (uint16_t)total);
    put16(ip + 4, id);
    put16(ip + 10, fold(sum16(ip, 20, 0)));
    put16(udp + 4, (uint16_t)(8 + plen));
    uint32_t ps = sum16(ip + 12, 8, 0) + IPPROTO_UDP + (uint32_t)(8 + plen);
    uint16_t c = fold(sum16(udp, 8 + plen, ps));
    put16(udp + 6, c ? c : 0xFFFF);
    return (ssize_t)(14 + total);
}
