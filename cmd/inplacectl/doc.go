// Command inplacectl renders JobSets as the webhooks would store them and
// evaluates and tests policies, offline.
//
// It only calls package app, which tests call too.
package main
