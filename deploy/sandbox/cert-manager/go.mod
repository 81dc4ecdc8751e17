module gangkeeper.io/sandbox/cert-manager

go 1.26.8

require github.com/cert-manager/cert-manager v1.21.2
