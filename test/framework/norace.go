//go:build !race

package framework

// raceDetector: the tests run with -race (here, they do not).
const raceDetector = false
