package cli

import (
	"net/http"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// addAdminFlags gives a command that talks to the broker's admin listener
// --admin and, for brokers with SASL, --sasl-user/--sasl-password (HTTP
// Basic with the same credentials as the Kafka listeners).
func addAdminFlags(f *pflag.FlagSet) {
	f.String(adminFlag, DefaultAdmin, "the broker's admin HTTP address (env "+AdminEnv+" when the flag is not set)")
	f.String(saslUserFlag, "", "SASL user, when the broker authenticates (its admin API then requires the same credentials)")
	f.String(saslPasswordFlag, "", "SASL password (env "+SASLPasswordEnv+" when the flag is not set)")
}

// adminAuth adds the SASL user's credentials to req, if one is given.
func adminAuth(cmd *cobra.Command, req *http.Request) {
	f := cmd.Flags()
	user, err := f.GetString(saslUserFlag)
	if err != nil || user == "" {
		return
	}
	pass, _ := f.GetString(saslPasswordFlag)
	if !f.Changed(saslPasswordFlag) {
		pass = os.Getenv(SASLPasswordEnv)
	}
	req.SetBasicAuth(user, pass)
}
