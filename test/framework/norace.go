//go:build !race

package framework

// raceDetector: the tests run with -race.
const raceDetector = false
