# Sourced by the scripts that play several hosts or a lossy network on one machine
# (netns-faults, mpi-faults, netns-hosts, multirail-tests): network namespaces, the veth links
# between two of them, the rate a link is shaped to (tc), a link taken down and up, and the
# nftables rules that drop or reset traffic. Needs root (ip, tc, nft).

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

# A rate as tc writes it (a number, then bit, kbit, mbit, gbit or tbit, or their bps forms in
# bytes; a bare number is bits) in bits per second, an integer; fails on anything else.
netns_rate_bits() {
  local r=${1,,} num unit mult
  [[ $r =~ ^([0-9]+(\.[0-9]+)?)([kmgt]?)(bit|bps)?$ ]] || return 1
  num=${BASH_REMATCH[1]} unit=${BASH_REMATCH[3]}
  case "$unit" in '') mult=1 ;; k) mult=1000 ;; m) mult=1000000 ;; g) mult=1000000000 ;;
                  t) mult=1000000000000 ;; esac
  [ "${BASH_REMATCH[4]}" = bps ] && mult=$((mult * 8))
  awk -v n="$num" -v m="$mult" 'BEGIN { b = n * m; if (b < 8000) exit 1; printf "%.0f\n", b }'
}

# The token bucket netns_shape gives rate $1 (bits per second): its burst in bytes, then its
# queue as time. The burst holds 1 ms at the rate, and never less than a GSO packet (64 KiB;
# a larger packet would be cut into segments or dropped): a bucket refilled later than that
# (a busy core) loses tokens, so the long-run rate falls short. The queue, 5 ms at the rate,
# is a switch port's buffer: it absorbs a burst, and beyond it packets are dropped.
netns_tbf_params() {
  local burst=$(($1 / 8 / 1000))
  [ "$burst" -lt 65536 ] && burst=65536
  echo "$burst ${NETNS_TBF_LATENCY:-5ms}"
}

# What namespace $1 sends out of interface $2 leaves at rate $3 at most (tc's notation, e.g.
# 1gbit, 500mbit): a tbf qdisc at the root, replacing any other. Shape both ends of a link
# for a link of that speed.
netns_shape() {
  local bits params
  bits=$(netns_rate_bits "$3") || { echo "netns_shape: not a rate: $3" >&2; return 1; }
  params=($(netns_tbf_params "$bits"))
  tc -n "$1" qdisc replace dev "$2" root tbf rate "$3" burst "${params[0]}" latency "${params[1]}"
}

# Interface $2 of namespace $1 back to the kernel's default queue, unshaped.
netns_unshape() {
  tc -n "$1" qdisc show dev "$2" | grep -q '^qdisc tbf .* root' || return 0
  tc -n "$1" qdisc del dev "$2" root
}

# One end of a link (namespace $1, interface $2) taken down or brought up ($3): the other end
# sees its carrier go and come back, as with a cable pulled at one side.
netns_link_set() { ip -n "$1" link set "$2" "$3"; }

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

# Namespace $1 drops, at hook $2 (input or output), the UDP datagrams whose number (counted
# from 0 by the rule, through that hook) modulo $3 is in the comma-separated list $4: loss that
# a run repeats exactly (a seed's draw of the list, or one datagram alone). TCP is left alone.
nft_drop_udp_at() {
  ip netns exec "$1" nft -f - <<NFT
table inet diwarp_faults {
  chain $2 {
    type filter hook $2 priority 0; policy accept;
    meta l4proto udp numgen inc mod $3 { $4 } counter drop
  }
}
NFT
}
