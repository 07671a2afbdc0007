// Package adminapi holds what the admin listener's JSON handlers share:
// writing answers and errors the same way (docs/api.md). Each capability
// (lag, delay, ...) serves its own routes; internal/server mounts them.
package adminapi

import (
	"encoding/json"
	"net/http"
)

// JSON writes v as indented JSON with status code.
func JSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// Error writes {"error": msg} with status code.
func Error(w http.ResponseWriter, code int, msg string) {
	JSON(w, code, map[string]string{"error": msg})
}
