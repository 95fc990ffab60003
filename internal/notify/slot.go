package notify

import "strings"

// Slot is the Redis Cluster hash slot of key: CRC16 (XMODEM) of its hash tag,
// the part between the first '{' and the next '}' when that is not empty, or
// of the whole key, modulo 16384.
func Slot(key string) int {
	return int(crc16(hashTag(key)) % 16384)
}

// hashTag is the part of key that Redis Cluster, and a Ring, hash.
func hashTag(key string) string {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if n := strings.IndexByte(key[open+1:], '}'); n > 0 {
			return key[open+1 : open+1+n]
		}
	}
	return key
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0), the checksum of
// Redis Cluster's key slots.
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
