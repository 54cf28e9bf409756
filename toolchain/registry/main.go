// The CNCF distribution registry with only what the project's tests use: the filesystem storage driver
// and htpasswd basic auth. Upstream's cmd/registry also links the S3, Azure and GCS drivers and the
// pull-through proxy, which make up most of its build time; the server code is upstream's, unchanged.
// Built by toolchain/install.sh against the pinned DISTRIBUTION_VERSION.
package main

import (
	"os"

	"github.com/distribution/distribution/v3/registry"
	_ "github.com/distribution/distribution/v3/registry/auth/htpasswd"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/inmemory"
)

func main() {
	if err := registry.RootCmd.Execute(); err != nil {
		os.Exit(1)
	}
}
