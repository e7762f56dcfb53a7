# Sourced by the scripts that play several hosts or a lossy network on one machine
# (netns-faults, mpi-faults, netns-hosts): network namespaces, the veth link between two of
# them, and the nftables rules that drop or reset traffic. Needs root (ip, nft).

# Namespace $1 with its loopback up; fails if it exists already.
netns_make() { ip netns add "$1" 2>/dev/null && ip -n "$1" link set lo up; }

# Joins namespaces $1 and $2 with a veth pair named $3 in the first and $4 in the second,
# addresses $5 and $6 (CIDR), MTU $7, both ends up.
netns_link() {
  ip link add "$3" netns "$1" mtu "$7" type veth peer name "$4" netns "$2" mtu "$7" &&
    ip -n "$1" addr add "$5" dev "$3" && ip -n "$2" addr add "$6" dev "$4" &&
    ip -n "$1" link set "$3" up && ip -n "$2" link set "$4" up
}

# The MTU of both ends of a link: namespace, interface, namespace, interface, MTU.
netns_mtu() { ip -n "$1" link set "$2" mtu "$5" && ip -n "$3" link set "$4" mtu "$5"; }

# Namespace $1 drops $2 % of the UDP datagrams it sends (a GSO run is one packet to nftables,
# so it goes whole: burst loss). TCP is left alone.
nft_drop_udp() {
  ip netns exec "$1" nft -f - <<NFT
table inet diwarp_faults {
  chain out {
    type filter hook output priority 0; policy accept;
    meta l4proto udp numgen random mod 100 < $2 counter drop
  }
}
NFT
}

# Namespace $1 answers $2 in 10000 of the TCP segments to or from address $3 with a reset (to
# their sender). SYNs and resets pass, so connections come up and go down cleanly.
nft_reset_tcp() {
  ip netns exec "$1" nft -f - <<NFT
table inet diwarp_faults {
  chain out {
    type filter hook output priority 0; policy accept;
    ip daddr $3 tcp flags & (syn | rst) == 0 numgen random mod 10000 < $2 counter reject with tcp reset
    ip saddr $3 tcp flags & (syn | rst) == 0 numgen random mod 10000 < $2 counter reject with tcp reset
  }
}
NFT
}

# Removes every rule of namespace $1.
nft_clear() { ip netns exec "$1" nft flush ruleset; }

# What the diwarp_faults rules of the namespaces given counted, summed.
nft_counted() {
  local n c sum=0
  for n in "$@"; do
    for c in $(ip netns exec "$n" nft list chain inet diwarp_faults out 2>/dev/null |
               sed -n 's/.*counter packets \([0-9]*\).*/\1/p'); do
      sum=$((sum + c))
    done
  done
  echo "$sum"
}
