//! tcpdump filter expressions compiled by libpcap and run in user space (being written).
