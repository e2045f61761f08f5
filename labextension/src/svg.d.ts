// The builder loads an .svg imported from TypeScript as its source text.
declare module '*.svg' {
  const source: string;
  export default source;
}
