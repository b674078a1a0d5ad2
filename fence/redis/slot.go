package redisfence

import "strings"

// Slots is the number of hash slots of a Redis Cluster.
const Slots = 16384

// Slot returns the hash slot of the Redis key k, as Redis Cluster computes
// it: CRC16 (XMODEM) of the key modulo [Slots], or of its hash tag, the
// part between the first "{" and the first "}" after it, when that part
// is not empty. Keys that share a hash tag ("acct:{42}:a", "acct:{42}:b")
// share a slot. A script that touches several keys needs them in one slot,
// in a cluster and out of one alike, since fence/redis refuses them
// otherwise; go-redis has no exported function for it.
func Slot(k string) int {
	if i := strings.IndexByte(k, '{'); i >= 0 {
		if j := strings.IndexByte(k[i+1:], '}'); j > 0 {
			k = k[i+1 : i+1+j]
		}
	}
	return int(crc16(k) % Slots)
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0), the one
// Redis Cluster uses.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
