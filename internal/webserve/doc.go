// Package webserve is the one shape of an HTTP server in a distrl process
// (the metrics endpoint of every worker process, the controller's
// dashboard and service discovery): bounded header size, read, write and
// idle timeouts and a bounded number of connections, so that slow or
// hostile clients cost a fixed amount of memory and never the process.
package webserve
