#!/usr/bin/env bash
# The upgrade runbook on Kubernetes (docs/deploy.md): savepoint -> new image -> restore.
#
#   deploy/k8s/upgrade.sh NEW_IMAGE SAVEPOINT [NAMESPACE]
#   e.g. deploy/k8s/upgrade.sh registry.example.com/sluicegate:0.2.0 before-0-2-0 sluicegate
#
# Needs kubectl (with rights on the namespace) and the `sluicegate` command of the new version
# on this machine. Needs savepoints (`sluicegate savepoint create --stop`, `coordinator
# --from-savepoint`). Steps, each waited for:
#   1. scale the coordinator to 0: the workers keep running the job's attempt, nothing is lost
#      but the checkpoint in flight (and a restarting coordinator cannot resume the old version
#      after the savepoint);
#   2. a Pod with the old image runs the coordinator once (it adopts the attempt) and takes a
#      stop-with-savepoint: final checkpoint, sinks published, every subtask stopped, savepoint
#      written; the Pod ends;
#   3. the workers get the new image (a rolling update; the job is stopped, nothing recovers);
#   4. the coordinator gets the new image and --from-savepoint=SAVEPOINT, and starts: it maps
#      operators by uid, re-splits and upgrades state, and runs the new version.
# If step 2 fails, the job is not stopped: scale the coordinator back to 1 (step 1 undone) and
# it resumes the old version. Going back after step 4: run this again with the old image and
# the same savepoint.
set -euo pipefail

if [[ $# -lt 2 ]]; then
  sed -n '2,6p' "$0" >&2
  exit 2
fi
IMAGE=$1
SAVEPOINT=$2
NAMESPACE=${3:-sluicegate}
TIMEOUT=${SLUICEGATE_UPGRADE_TIMEOUT:-15m}  # each rollout and wait
k() { kubectl --namespace "$NAMESPACE" "$@"; }
step() { printf '\nupgrade: %s\n' "$*" >&2; }

step "1/4 scale the coordinator to 0 (the workers keep running)"
k scale deployment/sluicegate-coordinator --replicas=0
k wait --for=delete pod --selector=app.kubernetes.io/component=coordinator --timeout="$TIMEOUT"

step "2/4 stop-with-savepoint $SAVEPOINT with the running version"
pod="sluicegate-savepoint-$SAVEPOINT"
k get deployment/sluicegate-coordinator --output=json \
  | sluicegate deploy savepoint-pod --savepoint "$SAVEPOINT" \
  | k apply --filename=-
DEADLINE=$((SECONDS + ${SLUICEGATE_SAVEPOINT_SECONDS:-900}))
until [[ $(k get "pod/$pod" --output=jsonpath='{.status.phase}') == Succeeded ]]; do
  if [[ $(k get "pod/$pod" --output=jsonpath='{.status.phase}') == Failed ]] \
    || ((SECONDS > DEADLINE)); then
    k logs "pod/$pod" >&2 || true
    echo "upgrade: the savepoint failed; the job still runs the old version without a" \
      "coordinator: kubectl -n $NAMESPACE scale deployment/sluicegate-coordinator --replicas=1" >&2
    exit 1
  fi
  sleep 2
done
k logs "pod/$pod" >&2
k delete "pod/$pod" --wait=false

step "3/4 the workers to $IMAGE"
k set image statefulset/sluicegate-worker "sluicegate=$IMAGE"
k rollout status statefulset/sluicegate-worker --timeout="$TIMEOUT"

step "4/4 the coordinator to $IMAGE, restoring $SAVEPOINT"
patch=$(k get deployment/sluicegate-coordinator --output=json \
  | sluicegate deploy restore-patch --savepoint "$SAVEPOINT" --image "$IMAGE")
k patch deployment/sluicegate-coordinator --type=json --patch="$patch"
k scale deployment/sluicegate-coordinator --replicas=1
k rollout status deployment/sluicegate-coordinator --timeout="$TIMEOUT"
k exec deployment/sluicegate-coordinator -- sluicegate status
