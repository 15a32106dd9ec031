// Package names is the one place that knows the etcd key layout of a trial.
//
//	{root}/{experiment}/{trial}/worker/{worker_name}          -> host:port (leased)
//	{root}/{experiment}/{trial}/status/{worker_name}          -> status record
//	{root}/{experiment}/{trial}/stream/{kind}/{name}/{index}  -> address
//	{root}/{experiment}/{trial}/params/{policy}               -> newest parameter version
//	{root}/{experiment}/{trial}/group/{group}/{rank}          -> collective group member (leased)
//
// Worker names are "{type}/{index}" ("actor/3", "policy/0") or a bare type ("ctl").
package names
