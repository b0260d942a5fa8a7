//go:build !race

package server_test

// raceDetector says whether this test binary was built with -race
// (race_on_test.go).
const raceDetector = false
