//go:build race

package integration

// raceBuild: the race detector slows the cluster fault tests about tenfold,
// so they run smaller counts under it (see faultScale).
const raceBuild = true
