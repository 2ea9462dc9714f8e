#!/usr/bin/env python3
"""One SIP call over WebSocket (RFC 7118, no TLS) between two real sockets, with its G.711
RTP: what scripts/sip-ws-capture.sh captures into testdata/voip/sip-websocket.pcap.

    sip_ws_call.py server HOST PORT     # the registrar/UAS: answers the call
    sip_ws_call.py client HOST PORT SERVER   # the UAC: calls, talks 1 s, hangs up

Python's standard library only: the HTTP Upgrade with the `sip` subprotocol and its
Sec-WebSocket-Accept, masked client frames, unmasked server frames (RFC 6455). To exercise
what a reader must handle, the server sends a ping before answering, and its 200 OK split
over a text frame and a continuation; every SIP message with SDP needs a 16-bit length.
"""
import base64
import hashlib
import os
import socket
import struct
import sys
import time

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
CALL_ID = "ws-call-1@trawl.test"
RTP_PACKETS = 50


def frame(opcode, payload, fin=True, mask=False):
    head = bytes([(0x80 if fin else 0) | opcode])
    n = len(payload)
    m = 0x80 if mask else 0
    if n < 126:
        head += bytes([m | n])
    else:
        head += bytes([m | 126]) + struct.pack("!H", n)
    if not mask:
        return head + payload
    key = os.urandom(4)
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def read_exact(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def read_message(sock):
    """One data message (frames joined, unmasked); control frames skipped."""
    message = b""
    while True:
        b0, b1 = read_exact(sock, 2)
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack("!H", read_exact(sock, 2))[0]
        elif n == 127:
            n = struct.unpack("!Q", read_exact(sock, 8))[0]
        key = read_exact(sock, 4) if b1 & 0x80 else None
        payload = read_exact(sock, n)
        if key:
            payload = bytes(b ^ key[i % 4] for i, b in enumerate(payload))
        opcode = b0 & 0x0F
        if opcode == 8:
            raise EOFError
        if opcode >= 8:
            continue
        message += payload
        if b0 & 0x80:
            return message.decode()


def read_http(sock):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            raise EOFError
        data += chunk
    return data.decode()


def sdp(host, port):
    return (f"v=0\r\no=- 1 1 IN IP4 {host}\r\ns=-\r\nc=IN IP4 {host}\r\nt=0 0\r\n"
            f"m=audio {port} RTP/AVP 0 101\r\na=rtpmap:0 PCMU/8000\r\n"
            "a=rtpmap:101 telephone-event/8000\r\n")


def sip(start, cseq, host, extra="", body="", to_tag=""):
    body_headers = "Content-Type: application/sdp\r\n" if body else ""
    return (f"{start}\r\nVia: SIP/2.0/WS {host};branch=z9hG4bK-{cseq.split()[0]}-ws\r\n"
            f"From: \"Alice\" <sip:alice@trawl.test>;tag=a1\r\n"
            f"To: <sip:bob@trawl.test>{to_tag}\r\nCall-ID: {CALL_ID}\r\nCSeq: {cseq}\r\n"
            f"{extra}{body_headers}Content-Length: {len(body)}\r\n\r\n{body}").encode()


def header(msg, name):
    for line in msg.split("\r\n"):
        if line.lower().startswith(name.lower() + ":"):
            return line.split(":", 1)[1].strip()
    return ""


def send_rtp(local, remote, ssrc):
    """RTP_PACKETS G.711 µ-law packets, 20 ms apart, from the bound socket `local`."""
    seq, ts = 1000, 0
    for _ in range(RTP_PACKETS):
        packet = struct.pack("!BBHII", 0x80, 0, seq, ts, ssrc) + b"\xff" * 160
        local.sendto(packet, remote)
        seq, ts = seq + 1, ts + 160
        time.sleep(0.02)


def media_of(msg):
    body = msg.split("\r\n\r\n", 1)[1]
    host = next(l.split()[-1] for l in body.split("\r\n") if l.startswith("c="))
    port = next(int(l.split()[1]) for l in body.split("\r\n") if l.startswith("m=audio"))
    return host, port


def server(host, port):
    listener = socket.create_server((host, port))
    conn, _ = listener.accept()
    request = read_http(conn)
    key = header(request, "Sec-WebSocket-Key")
    accept = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
    conn.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                  "Connection: Upgrade\r\n"
                  f"Sec-WebSocket-Accept: {accept}\r\nSec-WebSocket-Protocol: sip\r\n\r\n")
                 .encode())
    rtp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rtp.bind((host, 40002))
    tag = ";tag=b1"
    while True:
        try:
            msg = read_message(conn)
        except EOFError:
            break
        method = msg.split(" ", 1)[0]
        cseq = header(msg, "CSeq")
        if method == "INVITE":
            remote = media_of(msg)
            conn.sendall(frame(9, b"ping"))
            conn.sendall(frame(1, sip("SIP/2.0 100 Trying", cseq, host)))
            conn.sendall(frame(1, sip("SIP/2.0 180 Ringing", cseq, host, to_tag=tag)))
            time.sleep(0.2)
            ok = sip("SIP/2.0 200 OK", cseq, host, "Server: sip_ws_call.py\r\n",
                     sdp(host, 40002), to_tag=tag)
            conn.sendall(frame(1, ok[:100], fin=False) + frame(0, ok[100:]))
        elif method == "ACK":
            send_rtp(rtp, remote, 0xB0B)
        elif method == "BYE":
            conn.sendall(frame(1, sip("SIP/2.0 200 OK", cseq, host, to_tag=tag)))
    conn.close()


def client(host, port, server_host):
    conn = socket.create_connection((server_host, port), source_address=(host, 0))
    key = base64.b64encode(os.urandom(16)).decode()
    conn.sendall((f"GET / HTTP/1.1\r\nHost: {server_host}:{port}\r\nUpgrade: websocket\r\n"
                  f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                  "Sec-WebSocket-Protocol: sip\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
    read_http(conn)
    rtp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rtp.bind((host, 40000))
    uri = f"sip:bob@{server_host}"
    conn.sendall(frame(1, sip(f"INVITE {uri} SIP/2.0", "1 INVITE", host,
                              "User-Agent: sip_ws_call.py\r\n", sdp(host, 40000)), mask=True))
    while True:
        msg = read_message(conn)
        if msg.startswith("SIP/2.0 200"):
            break
    remote = media_of(msg)
    conn.sendall(frame(1, sip(f"ACK {uri} SIP/2.0", "1 ACK", host, to_tag=";tag=b1"),
                       mask=True))
    send_rtp(rtp, remote, 0xA11CE)
    time.sleep(0.1)
    conn.sendall(frame(1, sip(f"BYE {uri} SIP/2.0", "2 BYE", host, to_tag=";tag=b1"),
                       mask=True))
    read_message(conn)
    conn.sendall(frame(8, struct.pack("!H", 1000), mask=True))
    conn.close()


if __name__ == "__main__":
    if sys.argv[1] == "server":
        server(sys.argv[2], int(sys.argv[3]))
    else:
        client(sys.argv[2], int(sys.argv[3]), sys.argv[4])
