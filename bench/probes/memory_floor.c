// The memory floor of trace (b) for a flow table like trawl's, with no feature work.
//
// Per packet, as `trawl flows` does it: the record is cut from a 1 MiB read() buffer; the
// flow's index slot (4 bytes, at random in a 32 MiB huge-page index) is read; the flow's
// 320-byte entry (flows visited in round order, as trace (b) deals them) has its key line
// compared and written, its direction's line read and written, and, for the first 10 packets
// of each flow, its early-packet line written. Slots and entry lines are prefetched 16 packets
// ahead, as trawl's pipeline does; the slab is populated 4 MiB at a time (MADV_POPULATE_WRITE).
// The work per packet is a handful of adds: what remains is the cost of the memory traffic.
//
//   cc -O2 -o memory_floor bench/probes/memory_floor.c
//   /usr/bin/time -f '%U user %S sys' ./memory_floor bench/work/b.pcap
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

enum { FLOWS = 1200000, ENTRY = 320, SLOTS = 8 << 20, LEAD = 16, RECORD = 80, EARLY = 10 };

static uint64_t slot_of(uint64_t flow) { return (flow * 0x9e3779b97f4a7c15ull) >> 41; }

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s b.pcap\n", argv[0]);
        return 2;
    }
    int fd = open(argv[1], O_RDONLY);
    if (fd < 0) {
        perror(argv[1]);
        return 1;
    }
    size_t buf_len = 1 << 20;
    uint8_t *buf = malloc(buf_len);
    uint32_t *index = mmap(0, SLOTS * 4ul, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    madvise(index, SLOTS * 4ul, MADV_HUGEPAGE);
    for (uint64_t f = 0; f < FLOWS; f++) index[slot_of(f)] = (uint32_t)f + 1;
    size_t slab_len = (size_t)FLOWS * ENTRY, populated = 0;
    uint8_t *slab = mmap(0, slab_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    madvise(slab, slab_len, MADV_NOHUGEPAGE);
    uint64_t packet = 0, check = 0;
    size_t have = 0;  // bytes in buf; a record cut by the end of a read moves to the front
    ssize_t got;
    lseek(fd, 24, SEEK_SET);
    while ((got = read(fd, buf + have, buf_len - have)) > 0) {
        have += (size_t)got;
        size_t off = 0;
        for (; off + RECORD <= have; off += RECORD, packet++) {
            uint64_t ahead = (packet + LEAD) % FLOWS, round_ahead = (packet + LEAD) / FLOWS;
            __builtin_prefetch(&index[slot_of(ahead)]);
            uint8_t *e_ahead = slab + ahead * ENTRY;
            if ((size_t)(e_ahead - slab) + ENTRY > populated && populated < slab_len) {
                size_t step = 4 << 20;
                madvise(slab + populated, step < slab_len - populated ? step : slab_len - populated,
                        MADV_POPULATE_WRITE);
                populated += step;
            }
            __builtin_prefetch(e_ahead, 1);
            __builtin_prefetch(e_ahead + 64 + 64 * (round_ahead & 1), 1);
            if (round_ahead < EARLY) __builtin_prefetch(e_ahead + 192, 1);

            uint64_t flow = packet % FLOWS, round = packet / FLOWS;
            uint64_t ts = *(uint64_t *)(buf + off);
            uint32_t slot = index[slot_of(flow)];
            uint8_t *e = slab + (uint64_t)(slot - 1) * ENTRY;
            uint64_t *line0 = (uint64_t *)e;
            check += line0[0] == flow;  // the key compare
            line0[0] = flow;
            line0[5] = ts;
            uint64_t *dir = (uint64_t *)(e + 64 + 64 * (round & 1));
            dir[1] += *(uint16_t *)(buf + off + 12);  // bytes
            dir[2] += 1;                               // packets
            dir[0] = ts;
            if (round < EARLY) ((uint32_t *)(e + 192))[round] = (uint32_t)ts;
        }
        memmove(buf, buf + off, have - off);
        have -= off;
    }
    printf("%lu packets, check %lu\n", (unsigned long)packet, (unsigned long)check);
    return 0;
}
