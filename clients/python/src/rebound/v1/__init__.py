"""Code generated from proto/rebound/v1/rebound.proto by clients/python/generate.sh. DO NOT EDIT."""
