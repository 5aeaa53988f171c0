#!/bin/sh
# Helper used by the hello-skill example.
name=${1:-world}
printf 'Hello, %s! This greeting came from a skill.\n' "$name"
