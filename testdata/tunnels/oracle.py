#!/usr/bin/env python3
"""Per-packet tunnel oracle from tshark's dissectors.  Usage: oracle.py CAPTURE > CAPTURE.tshark.txt

One line per frame: `N SRC>DST PROTO PORTS[ via TYPE OUTER_SRC>OUTER_DST id ID]`, where SRC, DST
and PROTO are those of the innermost IP header tshark decoded (ICMP quotes excluded), PORTS is
`sport>dport` for TCP/UDP/SCTP and `-` otherwise, and the `via` part names the outermost tunnel
between the first IP header and the innermost one: its type (gre, erspan, vxlan, gtpu, geneve,
teredo, mpls_udp, ipip), the first IP header's addresses, and its id (GRE key or PPTP call id,
ERSPAN session,
VXLAN/Geneve VNI, GTP-U TEID, top MPLS label; 0 where none). A frame without IP is `N -`.
"""
import subprocess, sys

FIELDS = ["frame.number", "frame.protocols", "ip.src", "ip.dst", "ip.proto", "ipv6.src",
          "ipv6.dst", "ipv6.nxt", "tcp.srcport", "tcp.dstport", "udp.srcport", "udp.dstport",
          "sctp.srcport", "sctp.dstport", "gtp.teid", "vxlan.vni", "geneve.vni",
          "erspan.spanid", "gre.key", "gre.key.call_id", "mpls.label"]
LAYER_PROTO = {"icmp": "1", "igmp": "2", "tcp": "6", "udp": "17", "gre": "47", "esp": "50",
               "ah": "51", "icmpv6": "58", "ospf": "89", "pim": "103", "vrrp": "112",
               "sctp": "132"}
UDP_TUNNELS = {"gtp": ("gtpu", "gtp.teid"), "vxlan": ("vxlan", "vxlan.vni"),
               "geneve": ("geneve", "geneve.vni"), "teredo": ("teredo", None),
               "mpls": ("mpls_udp", "mpls.label")}


def first_int(v):
    if not v:
        return 0
    v = v.split(",")[0]
    return int(v, 16) if v.startswith("0x") else int(v)


def line(d):
    layers = d["frame.protocols"].split(":")
    # Stop at ICMP: what follows is a quoted header, not a tunnel's payload.
    for stop in ("icmp", "icmpv6"):
        if stop in layers:
            layers = layers[: layers.index(stop) + 1]
    occ = {k: (d[k].split(",") if d[k] else []) for k in FIELDS[2:14]}
    ips, n4, n6 = [], 0, 0  # (layer index, src, dst, proto) of each IP header
    for i, l in enumerate(layers):
        if l == "ip":
            ips.append((i, occ["ip.src"][n4], occ["ip.dst"][n4], occ["ip.proto"][n4]))
            n4 += 1
        elif l == "ipv6":
            nxt = occ["ipv6.nxt"]
            ips.append((i, occ["ipv6.src"][n6], occ["ipv6.dst"][n6], nxt[-1] if nxt else "59"))
            n6 += 1
    if not ips:
        return f"{d['frame.number']} -"
    i, src, dst, proto = ips[-1]
    # The protocol after IPv6 extension headers, by tshark's layer names (ipv6.nxt is that of
    # the first header only); the header's own field for protocols without a layer here.
    after = [l for l in layers[i + 1 :] if not l.startswith("ipv6.")]
    proto = LAYER_PROTO.get(after[0], proto) if after else proto
    ports = "-"
    for name in ("tcp", "udp", "sctp"):
        if after[:1] == [name]:
            # The innermost transport header is the last occurrence.
            ports = f"{occ[name + '.srcport'][-1]}>{occ[name + '.dstport'][-1]}"
    text = f"{d['frame.number']} {src}>{dst} {proto} {ports}"
    if len(ips) > 1:
        o = ips[0]
        nxt = layers[o[0] + 1 : o[0] + 3]
        if nxt[:1] == ["gre"]:
            kind, id = ("erspan", first_int(d["erspan.spanid"])) if nxt[1:] == ["erspan"] \
                else ("gre", first_int(d["gre.key"] or d["gre.key.call_id"]))
        elif nxt[:1] == ["udp"] and nxt[1:2] and nxt[1] in UDP_TUNNELS:
            kind, field = UDP_TUNNELS[nxt[1]]
            id = first_int(d[field]) if field else 0
        else:
            kind, id = "ipip", 0
        text += f" via {kind} {o[1]}>{o[2]} id {id}"
    return text


def main():
    cmd = ["tshark", "-n", "-r", sys.argv[1], "-T", "fields", "-E", "separator=|",
           "-E", "occurrence=a", "-E", "aggregator=,"]
    for f in FIELDS:
        cmd += ["-e", f]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    version = subprocess.run(["tshark", "-v"], capture_output=True, text=True).stdout
    print(f"# {sys.argv[1].split('/')[-1]}: {version.splitlines()[0]}; testdata/tunnels/oracle.py")
    for row in out.splitlines():
        print(line(dict(zip(FIELDS, row.split("|")))))


main()
