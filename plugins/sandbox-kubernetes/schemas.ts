import Type, { type Static } from 'typebox'

/** Options of the Kubernetes engine plugin, fed from AppConfig by fastify.config.ts (docs/engine.md#kubernetes). */
export const SandboxKubernetesOptions = Type.Object({
  apiUrl: Type.Optional(Type.String({ default: '', description: 'KUBE_API_URL: the API server; empty = in-cluster service account, else the kubeconfig\'s current context' })),
  namespace: Type.Optional(Type.String({ default: '', description: 'KUBE_NAMESPACE: where sandboxes live; empty = the service account\'s or the context\'s namespace, else default' })),
  runtimeClassName: Type.Optional(Type.String({ default: '', description: 'KUBE_RUNTIME_CLASS: the pods\' runtimeClassName (gVisor, Kata); empty = the cluster default' })),
  storageClassName: Type.Optional(Type.String({ default: '', description: 'KUBE_STORAGE_CLASS: the volumes\' storageClassName; empty = the cluster default' })),
  volumeSize: Type.Optional(Type.String({ default: '10Gi', description: 'KUBE_VOLUME_SIZE: requested size of each volume' })),
  serverSelector: Type.Optional(Type.String({ default: '', description: 'KUBE_SERVER_SELECTOR: labels of the server\'s pods (a=b,c=d), the only pods sandboxes may reach' })),
  serverAddress: Type.Optional(Type.String({ default: '', description: 'KUBE_SERVER_ADDRESS: where sandboxes reach the server (its egress proxy)' })),
  sharedClaim: Type.Optional(Type.String({ default: '', description: 'KUBE_SHARED_CLAIM: the ReadWriteMany claim the server mounts at dataDir; sandboxes mount its areas by subPath' })),
  dataDir: Type.Optional(Type.String({ default: '/data', description: 'DATA_DIR: where the server mounts the shared claim (the chats\' areas, the user-skills cache)' })),
  skillsDir: Type.Optional(Type.String({ default: '', description: 'SKILLS_DIR: the built-in skills, mounted when on the shared claim' })),
  maxStarting: Type.Optional(Type.Integer({ default: 8, minimum: 0, description: 'KUBE_MAX_STARTING: pods brought up at once (a burst of new chats queues in order of arrival); 0 = no bound' })),
  uid: Type.Optional(Type.Integer({ default: 1000, minimum: 1, description: 'the sandbox user\'s uid (runAsUser)' })),
  gid: Type.Optional(Type.Integer({ default: 1000, minimum: 1, description: 'the sandbox user\'s gid (runAsGroup, fsGroup)' }))
})
export type SandboxKubernetesOptions = Static<typeof SandboxKubernetesOptions>
