//go:build race

package server_test

// raceDetector says whether this test binary was built with -race, which
// makes a process that only copies memory too slow to load anything.
const raceDetector = true
