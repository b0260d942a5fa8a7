package device

// RingSize is the number of command slots; a power of two.
const RingSize = 64
