// Package tools defines what a tool is for Countersign: a name, a risk level,
// a Go input struct whose JSON Schema the model is shown, and a run function.
// It validates and normalizes what a model sends before anything decides on it.
package tools
