module tracegen

go 1.22
