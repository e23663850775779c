// The garbage collector of kube-controller-manager alone, for the tests against the real
// kube-apiserver (tests/realkube/build.sh builds it next to kube-apiserver): the same controller
// and wiring as kube-controller-manager's garbagecollector controller (its metadata informers, a
// discovery sync that picks up CRDs registered at run time), without the other controllers, whose
// modules the Go module proxy does not all serve.
//
//	garbage-collector --kubeconfig FILE
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/controller-manager/pkg/informerfactory"
	"k8s.io/kubernetes/pkg/controller/garbagecollector"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of an identity that may delete anything")
	syncPeriod := flag.Duration("sync-period", 2*time.Second, "how often discovery is read again (new CRDs)")
	flag.Parse()
	if err := run(*kubeconfig, *syncPeriod); err != nil {
		fmt.Fprintln(os.Stderr, "garbage-collector:", err)
		os.Exit(1)
	}
}

func run(kubeconfig string, syncPeriod time.Duration) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 100, 200
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))
	factory := informerfactory.NewInformerFactory(informers.NewSharedInformerFactory(kube, 0),
		metadatainformer.NewSharedInformerFactory(md, 0))
	started := make(chan struct{})
	gc, err := garbagecollector.NewGarbageCollector(ctx, kube, md, mapper, garbagecollector.DefaultIgnoredResources(),
		factory, started)
	if err != nil {
		return err
	}
	go gc.Run(ctx, 5, 30*time.Second)
	go gc.Sync(ctx, kube.Discovery(), syncPeriod)
	factory.Start(ctx.Done())
	close(started)
	<-ctx.Done()
	return nil
}
