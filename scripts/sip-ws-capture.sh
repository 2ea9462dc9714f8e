#!/usr/bin/env bash
# Captures one SIP call over WebSocket (RFC 7118, no TLS) with its RTP into
# testdata/voip/sip-websocket.pcap: scripts/sip_ws_call.py's server and client talk over the
# loopback of a fresh network namespace (real kernel TCP and UDP) while dumpcap records it.
# Then regenerate the tshark goldens: scripts/voip-oracle.sh. Needs root, dumpcap (tshark), python3.
set -euo pipefail
cd "$(dirname "$0")/.."
ns=trawl-sip-ws-$$
out=testdata/voip/sip-websocket.pcap
ip netns add "$ns"
cleanup() { ip netns pids "$ns" 2>/dev/null | xargs -r kill 2>/dev/null || true; ip netns del "$ns"; }
trap cleanup EXIT
ip netns exec "$ns" ip link set lo up
ip netns exec "$ns" dumpcap -q -P -i lo -w "$out" -f 'tcp port 8080 or udp' 2>/dev/null &
dump=$!
sleep 1
ip netns exec "$ns" python3 scripts/sip_ws_call.py server 127.0.0.1 8080 &
server=$!
sleep 0.5
ip netns exec "$ns" python3 scripts/sip_ws_call.py client 127.0.0.2 8080 127.0.0.1
wait "$server"
sleep 0.5
kill "$dump"
wait "$dump" || true
echo "sip-ws-capture.sh: $(capinfos -c -M "$out" | awk '/Number of packets/{print $NF}') packets in $out"
