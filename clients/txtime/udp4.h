/*
 * udp4.h — the Ethernet/IPv4/UDP frame the kernel would build for a UDP datagram, for libkeepon_txtime.so, which
 * sends such datagrams through keepon instead of the kernel's IP stack.
 *
 * udp4_goes_out() decides, as the kernel's routing would, whether a datagram of a socket leaves through the
 * interface: the device the socket is bound to (SO_BINDTODEVICE); for multicast, IP_MULTICAST_IF (by index, as
 * remembered by the caller, or by address); else the main routing table (/proc/net/route). udp4_head() builds the
 * headers — the next hop's MAC from the neighbour table (/proc/net/arp; keepon resolves no address), the group's
 * or broadcast's MAC; the socket's source address and port (an unbound socket is bound first), TTL, TOS — all but
 * lengths, identification and checksums, which udp4_frame() fills in around a payload. Errors are -errno.
 */
#ifndef KEEPON_UDP4_H
#define KEEPON_UDP4_H

#include <net/if.h>
#include <netinet/in.h>
#include <stdint.h>
#include <sys/types.h>

/** Bytes of Ethernet, IPv4 (no options) and UDP headers. */
#define UDP4_HEAD 42

/** The interface datagrams leave through. */
struct udp4_link {
    char ifname[IF_NAMESIZE];
    int ifindex;
    uint8_t mac[6]; /* its address: the frames' source */
    int mtu;
};

/* 1 if a datagram of socket `fd` to `dst` (host order) leaves through the interface; `mc_ifindex` is the socket's
 * IP_MULTICAST_IF index (0: none, or set by address). */
int udp4_goes_out(const struct udp4_link *l, int fd, uint32_t dst, int mc_ifindex);

/* The headers before a datagram from `fd` to `to`: 0, -EHOSTUNREACH (no neighbour entry for the next hop), -EACCES
 * (broadcast without SO_BROADCAST), or bind's -errno. */
int udp4_head(const struct udp4_link *l, int fd, const struct sockaddr_in *to, uint8_t head[UDP4_HEAD]);

/* The frame around the `plen` payload bytes at frame + UDP4_HEAD; its length, or -EMSGSIZE over the MTU. */
ssize_t udp4_frame(const struct udp4_link *l, const uint8_t head[UDP4_HEAD], uint16_t id, size_t plen,
                   uint8_t *frame);

#endif /* KEEPON_UDP4_H */
