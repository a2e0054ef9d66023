module tracegen-http

go 1.22
