#!/usr/bin/env python3
"""Builds aruba-gre-80211http.pcap: the real 802.11 frames of arkime's 80211http.pcap (radiotap,
FCS) carried the way an Aruba access point tunnels them to its controller: Ethernet / IPv4
(protocol 47) / GRE (protocol 0x8200) / 802.11 without FCS.  Frames the station sent (To DS)
go from the AP (10.10.0.2) to the controller (10.10.0.1), the others back.  No tool on this
machine emits Aruba's GRE, so the outer headers are written here; every 802.11 byte is the
original capture's.  Usage: make-aruba-gre.py 80211http.pcap OUT.pcap
"""
import struct, sys

AP, CONTROLLER = bytes([10, 10, 0, 2]), bytes([10, 10, 0, 1])
AP_MAC, CONTROLLER_MAC = bytes.fromhex("000b86000002"), bytes.fromhex("000b86000001")


def checksum(header):
    s = sum(struct.unpack("!10H", header))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


def wrap(frame, ident):
    to_ds = frame[1] & 0x01
    src, dst = (AP, CONTROLLER) if to_ds else (CONTROLLER, AP)
    smac, dmac = (AP_MAC, CONTROLLER_MAC) if to_ds else (CONTROLLER_MAC, AP_MAC)
    gre = struct.pack("!HH", 0, 0x8200) + frame
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(gre), ident, 0, 64, 47, 0, src, dst)
    ip = ip[:10] + struct.pack("!H", checksum(ip)) + ip[12:]
    return dmac + smac + b"\x08\x00" + ip + gre


def main():
    data = open(sys.argv[1], "rb").read()
    magic, = struct.unpack("<I", data[:4])
    assert magic == 0xA1B2C3D4, "little-endian microsecond pcap expected"
    assert struct.unpack("<I", data[20:24])[0] == 127, "radiotap expected"
    out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)]
    off, n = 24, 0
    while off < len(data):
        sec, usec, incl, orig = struct.unpack("<IIII", data[off:off + 16])
        rec = data[off + 16:off + 16 + incl]
        off += 16 + incl
        rt_len, = struct.unpack("<H", rec[2:4])
        frame = rec[rt_len:-4]  # radiotap off, FCS off (every frame of this capture has one)
        n += 1
        pkt = wrap(frame, n)
        out.append(struct.pack("<IIII", sec, usec, len(pkt), len(pkt)) + pkt)
    open(sys.argv[2], "wb").write(b"".join(out))


main()
