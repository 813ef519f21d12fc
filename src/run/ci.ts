/**
 * The CI run a job is part of, from the variables each CI system sets: the run's address, the
 * commit and the branch, for the alert's body. Undefined outside CI.
 */
import type { Env } from "../core/env.js";

export interface CiRun {
  system: string;
  url?: string;
  commit?: string;
  branch?: string;
}

interface CiVariables {
  system: string;
  /** Set (non-empty) in this CI. */
  marker: string;
  url: (env: Env) => string | undefined;
  commit: string;
  branch: string;
}

const SYSTEMS: readonly CiVariables[] = [
  {
    system: "GitHub Actions",
    marker: "GITHUB_ACTIONS",
    url: (e) =>
      e.GITHUB_SERVER_URL && e.GITHUB_REPOSITORY && e.GITHUB_RUN_ID
        ? `${e.GITHUB_SERVER_URL}/${e.GITHUB_REPOSITORY}/actions/runs/${e.GITHUB_RUN_ID}`
        : undefined,
    commit: "GITHUB_SHA",
    branch: "GITHUB_REF_NAME",
  },
  {
    system: "GitLab CI",
    marker: "GITLAB_CI",
    url: (e) => e.CI_JOB_URL || e.CI_PIPELINE_URL,
    commit: "CI_COMMIT_SHA",
    branch: "CI_COMMIT_REF_NAME",
  },
  {
    system: "Buildkite",
    marker: "BUILDKITE",
    url: (e) => e.BUILDKITE_BUILD_URL,
    commit: "BUILDKITE_COMMIT",
    branch: "BUILDKITE_BRANCH",
  },
  {
    system: "CircleCI",
    marker: "CIRCLECI",
    url: (e) => e.CIRCLE_BUILD_URL,
    commit: "CIRCLE_SHA1",
    branch: "CIRCLE_BRANCH",
  },
  { system: "Jenkins", marker: "JENKINS_URL", url: (e) => e.BUILD_URL, commit: "GIT_COMMIT", branch: "GIT_BRANCH" },
  {
    system: "Azure Pipelines",
    marker: "TF_BUILD",
    url: (e) =>
      e.SYSTEM_COLLECTIONURI && e.SYSTEM_TEAMPROJECT && e.BUILD_BUILDID
        ? `${e.SYSTEM_COLLECTIONURI}${e.SYSTEM_TEAMPROJECT}/_build/results?buildId=${e.BUILD_BUILDID}`
        : undefined,
    commit: "BUILD_SOURCEVERSION",
    branch: "BUILD_SOURCEBRANCHNAME",
  },
];

export function ciRun(env: Env): CiRun | undefined {
  const ci = SYSTEMS.find((s) => env[s.marker]);
  if (!ci) return undefined;
  const url = ci.url(env);
  const commit = env[ci.commit];
  const branch = env[ci.branch];
  return { system: ci.system, ...(url ? { url } : {}), ...(commit ? { commit } : {}), ...(branch ? { branch } : {}) };
}
