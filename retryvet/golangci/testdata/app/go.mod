module gclapp

go 1.25.0
