import js from '@eslint/js'
import tseslint from 'typescript-eslint'

export default tseslint.config(
  { ignores: ['node_modules/', 'data/', '.tap/', 'grafana/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      globals: {
        process: 'readonly',
        console: 'readonly',
        Buffer: 'readonly',
        setTimeout: 'readonly',
        clearTimeout: 'readonly',
        setInterval: 'readonly',
        clearInterval: 'readonly',
        setImmediate: 'readonly',
        URL: 'readonly',
        AbortController: 'readonly',
        AbortSignal: 'readonly',
        TextDecoder: 'readonly',
        TextEncoder: 'readonly',
        fetch: 'readonly',
      },
    },
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  {
    // Type-aware rules: they read the types tsc infers, through the project service (tsconfig.json).
    files: ['src/**/*.ts', 'test/**/*.ts', 'bench/**/*.ts'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      // A promise nobody awaits loses its rejection (an unhandled rejection ends the process).
      // tap's t.test() is the exception: tap queues the subtest and reports its failures itself.
      '@typescript-eslint/no-floating-promises': [
        'error',
        { allowForKnownSafePromises: [{ from: 'package', name: 'PromiseWithSubtest', package: '@tapjs/core' }] },
      ],
      // An async callback where a void one is expected (a listener, a request handler): its rejection goes nowhere.
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/no-unnecessary-type-assertion': 'error',
    },
  },
  {
    // The corridor stays a corridor you can read in one sitting: one step per function (issue #21).
    files: ['src/inference/corridor.ts'],
    rules: {
      'max-lines': ['error', { max: 300 }],
      'max-lines-per-function': ['error', { max: 80 }],
    },
  },
  {
    // The portal's script runs in the browser.
    files: ['src/portal/assets/**/*.js'],
    languageOptions: {
      sourceType: 'script',
      globals: {
        document: 'readonly',
        window: 'readonly',
        navigator: 'readonly',
        Element: 'readonly',
        HTMLInputElement: 'readonly',
        HTMLFormElement: 'readonly',
      },
    },
  },
)
