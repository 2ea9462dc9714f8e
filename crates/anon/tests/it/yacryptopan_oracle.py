#!/usr/bin/env python3
"""Anonymizes the addresses on stdin (one a line) with PyPI's yacryptopan, an independent
Crypto-PAn implementation, and prints them in Python's canonical form, one a line.
Usage: yacryptopan_oracle.py KEY_HEX < addresses (trawl-anon's tests/it/yacryptopan.rs)."""
import ipaddress
import sys

from yacryptopan import CryptoPAn

cp = CryptoPAn(bytes.fromhex(sys.argv[1]))
out = sys.stdout
for line in sys.stdin:
    out.write(str(ipaddress.ip_address(cp.anonymize(line.strip()))))
    out.write("\n")
