// Command etcd is etcd's own server (go.etcd.io/etcd/server/v3/etcdmain), built from the
// version this module pins; the etcd module's main package sits in a module of its own.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
