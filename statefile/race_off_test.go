//go:build !race

package statefile

const raceEnabled = false
