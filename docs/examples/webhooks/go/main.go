// Receives the custody service's webhooks and verifies them with the Standard Webhooks library
// (github.com/standard-webhooks/standard-webhooks/libraries/go).
// Run: WEBHOOK_SECRET=whsec_… PORT=3000 go run .
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

func main() {
	secret := os.Getenv("WEBHOOK_SECRET")
	// Secrets the service generated are whsec_ + base64 (the library's form); one you chose in
	// another form is its UTF-8 bytes.
	var wh *standardwebhooks.Webhook
	var err error
	if strings.HasPrefix(secret, "whsec_") {
		wh, err = standardwebhooks.NewWebhook(secret)
	} else {
		wh, err = standardwebhooks.NewWebhookRaw([]byte(secret))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// Verify the body exactly as received (bytes, not re-serialized JSON).
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err == nil {
			err = wh.Verify(body, r.Header)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "rejected:", err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		var event any
		_ = json.Unmarshal(body, &event)
		// webhook-id is the same on every retry of a delivery: use it to drop duplicates.
		line, _ := json.Marshal(map[string]any{"id": r.Header.Get("webhook-id"), "event": event})
		fmt.Println(string(line))
		w.WriteHeader(http.StatusNoContent)
	})
	port := os.Getenv("PORT")
	if port == "" {
		port = "3000"
	}
	fmt.Println("listening")
	if err := http.ListenAndServe("127.0.0.1:"+port, nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
